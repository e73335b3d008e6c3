"""Watchers: the watcher (due runs -> queue), the recurring watcher (events -> next run) and
the rescuer (stranded runs -> queue, history -> deleted)."""

from onthedot.watcher.recurring import RecurringWatcher
from onthedot.watcher.rescuer import Rescuer
from onthedot.watcher.watcher import Watcher

__all__ = ["RecurringWatcher", "Rescuer", "Watcher"]
