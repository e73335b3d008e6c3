"""I/O-free records, statuses, ids, errors and the clock that every role shares."""
