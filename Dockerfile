# One image for every role; the command picks the role (serve, api, watcher, worker, recurring,
# rescuer, migrate, token ...). docs/deploy.md describes the layouts.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir '.[production]'

# The program stays root-owned and read-only to the service; what it writes (the SQLite file of
# `serve` with the default database URL) goes to /data, owned by the runtime user. Mount a
# volume there to keep it: docker run -v onthedot-data:/data ...
# 65534 is `nobody` (group `nogroup`) in this Debian image.
RUN mkdir /data && chown 65534:65534 /data && chmod 0750 /data
ENV ONTHEDOT_DATABASE_URL=sqlite:////data/onthedot.db
VOLUME ["/data"]
WORKDIR /data
USER 65534:65534

EXPOSE 8080
ENTRYPOINT ["onthedot"]
CMD ["serve", "--host", "0.0.0.0"]
