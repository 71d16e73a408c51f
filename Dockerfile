# syntax=docker/dockerfile:1
#
# Multi-stage build of image-fetch-worker.
#   docker build -t image-fetch-worker .
#   docker run --rm image-fetch-worker --help
#
# Build stage: the official Swift image. swift:6.2-noble is a published tag (Swift 6.2.x on Ubuntu
# 24.04); the development machines run Swift 6.3, and a newer 6.x tag can be chosen with
#   docker build --build-arg SWIFT_IMAGE=swift:6.3-noble .
# Keep the runtime image on the same Ubuntu release as the build image, so the librabbitmq and
# libcurl the binary was linked against are the ones it finds at run time.
ARG SWIFT_IMAGE=swift:6.2-noble
ARG RUNTIME_IMAGE=ubuntu:noble

FROM ${SWIFT_IMAGE} AS build
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -q \
 && apt-get install -y -q --no-install-recommends librabbitmq-dev libcurl4-openssl-dev libssl-dev libidn2-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build

# Resolve dependencies in their own layer: it is rebuilt only when the manifest changes, not on every
# source edit. (Package.resolved is not committed; resolution follows the manifest's version ranges.)
COPY Package.swift ./
RUN swift package resolve

# scripts/release-build.sh is the release build that `make release` and the benchmarks use: the Swift
# runtime linked in, lld (part of the Swift toolchain) laying out the functions the worker runs
# together (Linker/image-fetch-worker.order), and packed relative relocations, which need glibc 2.36
# where the binary runs (the build image's Ubuntu 24.04 has 2.39, as does the runtime image).
# The git revision for `--version` and the build-info metric; the context has no .git:
#   docker build --build-arg REVISION="$(git describe --always --dirty)" .
ARG REVISION=unknown
COPY . .
RUN IFW_REVISION="$REVISION" scripts/release-build.sh --product image-fetch-worker \
 && mkdir -p /staging \
 && cp "$(swift build -c release --show-bin-path)/image-fetch-worker" /staging/ \
 && find -L "$(swift build -c release --show-bin-path)/" -maxdepth 1 -name '*.resources' \
      -exec cp -Ra {} /staging/ \;

# Runtime stage: the shared libraries the binary links (the Swift runtime is static), CA roots for
# https, and curl for the HEALTHCHECK. libvips (libvips42t64 on Ubuntu 24.04) decodes images when
# image.verify is decode; the worker opens it (dlopen) only then.
FROM ${RUNTIME_IMAGE}
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -q \
 && apt-get install -y -q --no-install-recommends librabbitmq4 libcurl4t64 libidn2-0 libvips42t64 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin worker \
 && mkdir -p /app /data/images \
 && chown worker:worker /data/images

WORKDIR /app
COPY --from=build /staging/ /app/
RUN ln -s /app/image-fetch-worker /usr/local/bin/image-fetch-worker

ENV STORAGE_PATH=/data/images
VOLUME ["/data/images"]
USER worker:worker
# /metrics, /healthz and /readyz (http.port)
EXPOSE 9090
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:9090/healthz || exit 1
# SIGTERM starts the drain (worker.drain_timeout, 25 s by default); give `docker stop -t` more than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["image-fetch-worker"]
CMD ["run"]
