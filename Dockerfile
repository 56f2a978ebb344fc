# celld: multi-stage build of a static binary on a minimal base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/celld .
# The data directory, empty, for the final stage to copy with its owner:
# distroless has no shell to mkdir or chown in.
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/celld /celld
# /data owned by nonroot (65532), so that a named volume mounted there
# starts writable (Docker copies the image's /data, owner included, into a
# new volume). For a bind mount or a Kubernetes volume, give the directory
# to uid 65532 (chown, or the pod's securityContext.fsGroup: 65532).
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot:nonroot
VOLUME /data
EXPOSE 6379
ENV CELLD_ADDR=0.0.0.0:6379 CELLD_DIR=/data
# --healthcheck reads the same CELLD_* variables as the server: it PINGs the
# plain port, or over TLS the TLS port when no plain port is served
# (CELLD_ADDR=0.0.0.0:0 CELLD_TLS_PORT=6380 ...).
HEALTHCHECK --interval=10s --timeout=3s CMD ["/celld", "--healthcheck"]
ENTRYPOINT ["/celld"]
