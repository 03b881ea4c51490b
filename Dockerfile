# A small static image: the binary built for musl, on an empty base, run as non-root.
# Built without default features: the production binary carries no emulated services and no
# dev Kubernetes API server (`quartet sandbox` / `quartet dev` explain how to get them).
FROM rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl && apt-get update && apt-get install -y musl-tools
WORKDIR /src
COPY . .
# The commit `quartet --version` prints (the build context has no .git): `--build-arg QUARTET_GIT_COMMIT=$(git rev-parse --short HEAD)`.
ARG QUARTET_GIT_COMMIT=unknown
# `dist`: the release profile with fat LTO and one codegen unit (Cargo.toml says why), linked
# with the code the operator runs first (.cargo/config.toml, link/README.md: bash, nm and the
# toolchain's rust-lld, all in this image).
RUN cargo build --profile dist --locked --no-default-features --target x86_64-unknown-linux-musl --bin quartet

FROM scratch
COPY --from=build /src/target/x86_64-unknown-linux-musl/dist/quartet /quartet
USER 65532:65532
ENTRYPOINT ["/quartet"]
CMD ["run"]
