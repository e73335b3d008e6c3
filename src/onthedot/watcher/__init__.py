"""Watchers: the dispatcher (due runs -> queue) and the recurring watcher (events -> next run)."""

from onthedot.watcher.dispatcher import Dispatcher
from onthedot.watcher.recurring import RecurringWatcher

__all__ = ["Dispatcher", "RecurringWatcher"]
