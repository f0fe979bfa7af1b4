"""The controller: the facade that wires registry, admission and runs together."""

from chongming.controller.controller import Controller as Controller
from chongming.controller.statistics import ControllerStats as ControllerStats
