# One image for every role; the command picks the role (api, watcher, worker, recurring, serve).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir '.[production]'
USER nobody
EXPOSE 8080
ENTRYPOINT ["onthedot"]
CMD ["serve", "--host", "0.0.0.0"]
