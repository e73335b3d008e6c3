"""What the SQL store and the SQL queues stand on: the SQLite connection, the PostgreSQL pool
and migration runner, the loader of named ``.sql`` queries, and how SQLite stores an instant.

The table queue lives in the store's database, so both use the same connection machinery; it
lives here, below both, so neither reaches into the other (docs/design.md#layers).
"""
