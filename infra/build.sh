#!/bin/sh
# The deploy build: `sam build` (cargo-lambda, the `release` profile) with that profile
# optimised for size rather than speed, for the Lambda zips only (docs/aws.md, "Built
# for size"). The `release` profile in Cargo.toml stays optimised for speed: it is also
# what `cargo run --release … serve` and the release archives use.
#
#   infra/build.sh [sam build options…]       e.g. infra/build.sh --config-env eu-west-1
#
# Each setting can be overridden from the environment (e.g. CARGO_PROFILE_RELEASE_OPT_LEVEL=3
# for the speed-optimised build). Cargo reads them; cargo-lambda and SAM pass them through.
set -eu
cd "$(dirname "$0")/.."

# Size over speed for the functions' code, and link-time optimisation across every crate.
: "${CARGO_PROFILE_RELEASE_OPT_LEVEL:=z}"
: "${CARGO_PROFILE_RELEASE_LTO:=fat}"
# A panic aborts the sandbox (cargo-lambda's own choice for release builds, said here
# rather than relied on): no landing pads to carry. Lambda logs the message and starts a
# new sandbox.
: "${CARGO_PROFILE_RELEASE_PANIC:=abort}"
# RUSTFLAGS is left alone: cargo-lambda tunes for the functions' CPU through
# `build.rustflags` (target-cpu=haswell on x86_64), which RUSTFLAGS would override; the
# x86-64 baseline was no smaller (docs/benchmarks.md).
export CARGO_PROFILE_RELEASE_OPT_LEVEL CARGO_PROFILE_RELEASE_LTO CARGO_PROFILE_RELEASE_PANIC

exec sam build --beta-features "$@"
