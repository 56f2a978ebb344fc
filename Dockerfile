# celld: multi-stage build of a static binary on a minimal base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/celld .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/celld /celld
USER nonroot:nonroot
VOLUME /data
EXPOSE 6379
ENV CELLD_ADDR=0.0.0.0:6379 CELLD_DIR=/data
HEALTHCHECK --interval=10s --timeout=3s CMD ["/celld", "--healthcheck"]
ENTRYPOINT ["/celld"]
