"""A task module that fails while it is imported."""

raise RuntimeError("this module cannot be imported")
