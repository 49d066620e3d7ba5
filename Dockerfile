# syntax=docker/dockerfile:1
# caliban-operator: a static binary on a distroless, non-root base.
# Build: make image (needs a Docker engine). The build reaches only the Go
# module proxy (GOPROXY); VERSION and COMMIT are stamped into the binary.

FROM golang:1.26 AS build
ARG VERSION=dev
ARG COMMIT=unknown
ARG GOPROXY=https://proxy.golang.org,direct
WORKDIR /src
# Dependencies first, so source edits reuse the module download layer.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/caliban-operator ./cmd/caliban-operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/caliban-operator /caliban-operator
# The Deployment sets the same uid; the image does not rely on it.
USER 10001:10001
ENTRYPOINT ["/caliban-operator"]
