"""Watchers: the dispatcher (due runs -> queue), the recurring watcher (events -> next run) and
the rescuer (stranded runs -> queue, history -> deleted)."""

from onthedot.watcher.dispatcher import Dispatcher
from onthedot.watcher.recurring import RecurringWatcher
from onthedot.watcher.rescuer import Rescuer

__all__ = ["Dispatcher", "RecurringWatcher", "Rescuer"]
