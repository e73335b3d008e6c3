"""All settings in one place: ``ONTHEDOT_*`` environment variables, overridable by CLI flags.

Defaults work out of the box: one SQLite file in the current directory, the table queue inside
it, the API on loopback.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ONTHEDOT_", extra="ignore")

    database_url: str = Field("sqlite:///onthedot.db",
                              description="sqlite:///path.db or postgresql://user@host/db")
    database_schema: str = Field("public", description="PostgreSQL schema (search_path) of "
                                 "the tables; created by migrate if missing")
    partition_ahead_days: int = Field(7, ge=0, description="PostgreSQL: daily job_runs "
                                      "partitions kept ready ahead of now")
    partition_far_months: int = Field(24, ge=0, le=120, description="PostgreSQL: monthly "
                                      "job_runs partitions kept ready past the daily ones, so "
                                      "far-future runs stay out of the default partition")
    retention_days: int = Field(30, ge=1, le=36_500, description="finished runs, read run "
                                "events, finished jobs and dead letters older than this are "
                                "deleted (PostgreSQL also drops whole daily partitions)")
    database_pool_size: int = Field(10, ge=1, description="PostgreSQL: connections per process")
    queue_prefix: str = Field("onthedot", pattern=r"^[a-z0-9][a-z0-9_-]*$",
                              description="NATS: stream and subject prefix (one per deployment)")
    queue_replicas: int = Field(1, ge=1, le=5, description="NATS: stream replicas (1 on one "
                                "server, 3 in a cluster)")
    queue_url: str | None = Field(None, description="nats://host:4222, or a comma-separated "
                                  "list of a cluster's servers; default: a table queue in the "
                                  "store's own database, SQLite or PostgreSQL")
    host: str = Field("127.0.0.1", description="API bind address")
    port: int = Field(8080, ge=0, le=65535, description="API port")
    workers: int = Field(256, ge=1, le=10_000,
                         description="runs one worker process executes concurrently; most "
                         "runs wait on I/O (a webhook, a model), so hundreds fit in one process")
    processes: int | None = Field(None, ge=1, le=1024, description="processes of `serve`, "
                                  "`api` and `worker`: a supervisor binds the API port once "
                                  "and runs this many copies that share it; default: the "
                                  "cores this process may use, at most 2 on SQLite (one "
                                  "file's write lock serialises every writer); 1 = no "
                                  "supervisor")
    visibility_timeout: float = Field(30.0, gt=0, description="seconds a received run stays "
                                      "invisible to other workers; heartbeats every third of it")
    min_interval: float = Field(60.0, ge=0, description="smallest allowed gap, in seconds, "
                                "between two occurrences of a recurring job")
    tick_seconds: float = Field(1.0, gt=0, le=1.0, description="watcher tick (at most 1 s)")
    shards: int = Field(32, ge=1, le=4096, description="number of run shards (fixed per database)")
    misfire_grace: float = Field(60.0, ge=0, description="seconds late before a run counts as "
                                 "missed and a job with misfire_policy=skip skips it")
    republish_after: float = Field(60.0, gt=0, description="seconds an ENQUEUED run may wait "
                                   "before the rescuer asks the queue whether its message still "
                                   "exists, and publishes it again if not")
    rescue_interval: float = Field(1.0, gt=0, le=60.0, description="seconds between two "
                                   "sweeps of the rescuer (retries that fell due, expired "
                                   "leases, lost messages, runs behind a watermark)")
    shutdown_grace: float = Field(30.0, ge=0, description="seconds in-flight runs get to finish "
                                  "on SIGTERM")
    default_timezone: str = Field("UTC", description="timezone of jobs that name none")
    shard_lease_seconds: float = Field(1.5, gt=0, description="shard ownership lease of a "
                                       "watcher, renewed every quarter of it: a dead watcher's "
                                       "shards are taken over within about 1.25 times this")
    leader_lease_seconds: float = Field(10.0, gt=0, description="how long the rescuer and the "
                                        "recurring watcher count as alive without a heartbeat "
                                        "(the first live one leads)")
    max_body_bytes: int = Field(65536, gt=0, description="largest accepted API request body")
    max_batch_body_bytes: int = Field(8_388_608, gt=0, description="largest accepted body of "
                                      "POST /v1/jobs:batch (up to 1,000 jobs)")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible API base URL "
                                     "(e.g. http://127.0.0.1:11434/v1) for the chat front door, "
                                     "prompt actions and news digests; trusted operator "
                                     "configuration; unset = offline parser and digests")
    llm_model: str = Field("gpt-4o-mini", description="default model name for the chat front "
                           "door, prompt actions and news digests")
    llm_api_key: str | None = Field(None, description="API key for llm_base_url")
    egress_allow: str = Field("", description="comma-separated host names and CIDRs that actions "
                              "may call although they are loopback, private or link-local, "
                              "each on every port or, written entry:port, on that port alone "
                              "(e.g. hooks.internal,10.1.0.0/16,127.0.0.1:8080); default: none")
    news_feeds_file: str | None = Field(None, description="JSON file of default news feeds per "
                                        "topic and language, replacing the shipped lists it "
                                        "names (docs/actions.md); default: the shipped feeds")
    smtp_url: str | None = Field(None, description="mail server for the email delivery "
                                 "channel: smtp://user:pass@host:587?starttls=true, or "
                                 "smtps://... for TLS from the start; unset = no email channel")
    smtp_from: str | None = Field(None, description="From address of delivered mail, e.g. "
                                  "onthedot@example.com (needed with smtp_url)")
    max_active_jobs: int = Field(100, ge=0, description="per user: the most jobs that are "
                                 "scheduled or paused at once; a create beyond it is answered "
                                 "429 quota_exceeded (0 = no limit)")
    create_rate_per_minute: int = Field(600, ge=0, description="per user and per API process: "
                                        "the most jobs created in a minute (each job of a "
                                        "batch counts); beyond it 429 rate_limited with "
                                        "Retry-After (0 = no limit)")
    parse_rate_per_minute: int = Field(120, ge=0, description="per user and per API "
                                       "process: the most sentences read by the parser in a "
                                       "minute (POST /v1/parse, POST /v1/chat, MCP tools given "
                                       "`when`); beyond it 429 rate_limited with Retry-After "
                                       "(0 = no limit)")
    run_rate_per_minute: int = Field(60, ge=0, description="per user and per API process: the "
                                     "most runs started now (POST /v1/jobs/{id}:run, MCP "
                                     "run_task_now, chat) in a minute; beyond it 429 "
                                     "rate_limited with Retry-After (0 = no limit)")
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    access_log: bool = Field(False, description="one log line per HTTP request (uvicorn's "
                             "access log); off by default: under load the line costs more "
                             "than many requests")
    # --- what an operator sees (logs and metrics of every role) ---
    log_format: Literal["text", "json"] = Field("text", description="text: one readable line "
                                                "per event; json: one JSON object per line "
                                                "(time, level, logger, message, and job_id, "
                                                "run_id, attempt, error when the line is about "
                                                "a run) for log shippers")
    log_quiet: str = Field("httpx,httpcore",
                           description="comma-separated loggers held at WARNING whatever "
                           "log_level says (their DEBUG lines are per request or per query); "
                           "empty to hear them all")
    metrics_port: int | None = Field(None, ge=0, le=65535, description="port of a Prometheus "
                                     "/metrics endpoint of this process (worker, watcher, "
                                     "recurring, rescuer); unset = none (serve and api always "
                                     "answer /metrics on the API port)")
    metrics_host: str = Field("127.0.0.1", description="bind address of the metrics endpoint")
    # --- the API's connections and repeated log lines (docs/operations.md, "Connections") ---
    max_connections: int = Field(1000, ge=1, le=1_000_000, description="open HTTP connections "
                                 "of one API process; beyond it the connection idle longest "
                                 "is closed to make room, or the new one when every connection "
                                 "has a request in progress")
    header_timeout_seconds: float = Field(10.0, gt=0, le=600, description="seconds a connection "
                                          "may take from accept (or a request's first byte) to "
                                          "the end of the request's headers; then it is closed")
    keep_alive_seconds: float = Field(5.0, gt=0, le=600, description="seconds an idle "
                                      "keep-alive connection is kept between two requests")
    log_repeat_seconds: float = Field(10.0, ge=0, le=3600, description="an identical log line "
                                      "is written once per this many seconds, then with the "
                                      "count of the copies suppressed (0 = write every copy)")

    @field_validator("smtp_url")
    @classmethod
    def _smtp_url_shape(cls, value: str | None) -> str | None:
        # Checked at start-up, so a typo is one clear line instead of failed mail at run time.
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("expected smtp://user:pass@host:port (or smtps://...)")
        try:
            parts.port  # noqa: B018 - reading it validates it
        except ValueError as exc:
            raise ValueError(f"bad port: {exc}") from None
        return value.strip()


def load_settings(**overrides: object) -> Settings:
    """Environment first, then explicit overrides (CLI flags) that are not None."""
    values = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**values)  # type: ignore[arg-type]
