"""Text rendering for terminals: the task, history and pipeline tables, escaping.

Pure functions (no I/O, no clock); the CLI and user code print what they return.
"""

from chongming.render.pipeline import render_pipeline as render_pipeline
from chongming.render.table import render_history as render_history
from chongming.render.table import render_rows as render_rows
from chongming.render.table import render_table as render_table
from chongming.render.table import summary_line as summary_line
from chongming.render.table import summary_of_counts as summary_of_counts
from chongming.render.text import display_width as display_width
from chongming.render.text import escape_text as escape_text
