#!/usr/bin/env bash
# Builds the two images the tests start with testcontainers, locally from Debian's packages, for
# machines that reach a Debian mirror but no image registry (`npm run test:images`; .ci/run):
#   1. a base image: `debootstrap --variant=minbase bookworm` into a temporary folder from the
#      mirror apt already uses, without its downloaded .debs and package lists, `docker import`ed;
#   2. from it, with the legacy builder (no buildx, no registry: the base is local),
#      scripts/test-images/postgres (Debian's postgresql-<major>) and scripts/test-images/redis.
# They are tagged with the names the tests look for, TEST_POSTGRES_IMAGE and TEST_REDIS_IMAGE
# (defaults postgres:15 and redis:7, the official images' names), so testcontainers finds them
# locally and never pulls. Idempotent: an image already present is kept, unless this script built
# it from files of scripts/test-images/ that have changed since (`docker rmi <name>` forces a
# rebuild). Needs root (debootstrap), docker and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

postgres_image=${TEST_POSTGRES_IMAGE:-postgres:15}
redis_image=${TEST_REDIS_IMAGE:-redis:7}
base_image=${TEST_BASE_IMAGE:-invoice-test-base:bookworm}
suite=bookworm
# The PostgreSQL major version: the tag's leading number (postgres:15 -> 15).
pg_major=${postgres_image##*:}
pg_major=${pg_major%%[!0-9]*}
[ -n "$pg_major" ] || pg_major=15

say() { printf 'test images: %s\n' "$*"; }
present() { docker image inspect "$1" >/dev/null 2>&1; }
# What an image is built from (its folder's files and the build arguments), kept in its label
# invoice-lifecycle.recipe: an image built from an older recipe is rebuilt.
recipe() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum && echo "$2") | sha256sum | cut -c1-16; }
# Present, and built from this recipe; an image without the label (pulled from a registry, or
# tagged by hand) is the user's choice and kept as is.
up_to_date() {
  local label
  label=$(docker image inspect -f '{{ index .Config.Labels "invoice-lifecycle.recipe" }}' "$1" 2>/dev/null) || return 1
  [ -z "$label" ] || [ "$label" = "<no value>" ] || [ "$label" = "$2" ]
}

command -v docker >/dev/null 2>&1 || { say "docker is not installed (Debian: apt-get install docker.io)" >&2; exit 1; }
docker info >/dev/null 2>&1 || { say "docker does not answer: start dockerd (e.g. dockerd --ip=127.0.0.1 &)" >&2; exit 1; }

postgres_recipe=$(recipe scripts/test-images/postgres "PG_MAJOR=$pg_major")
redis_recipe=$(recipe scripts/test-images/redis "")
if up_to_date "$postgres_image" "$postgres_recipe" && up_to_date "$redis_image" "$redis_recipe"; then
  say "$postgres_image and $redis_image are present: nothing to build"
  exit 0
fi

# The mirror apt uses (deb822 sources first, then the one-line format), else Debian's own.
mirror() {
  local m=""
  if [ -r /etc/apt/sources.list.d/debian.sources ]; then
    m=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$m" ] && [ -r /etc/apt/sources.list ]; then
    m=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }' /etc/apt/sources.list)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

if present "$base_image"; then
  say "base $base_image is present"
else
  command -v debootstrap >/dev/null 2>&1 || { say "debootstrap is not installed (Debian: apt-get install debootstrap)" >&2; exit 1; }
  [ "$(id -u)" -eq 0 ] || { say "debootstrap needs root: run this as root (or with sudo)" >&2; exit 1; }
  rootfs=$(mktemp -d /tmp/invoice-test-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  url=$(mirror)
  say "building base $base_image: debootstrap --variant=minbase $suite from $url (about 30 s)"
  debootstrap --variant=minbase "$suite" "$rootfs" "$url" >"$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; say "debootstrap failed (log: $rootfs.log)" >&2; exit 1; }
  rm -f "$rootfs.log"
  # ~127 MB without the downloaded packages and lists; the image builds run apt-get update anyway.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import - "$base_image" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
  say "base $base_image imported"
fi

# The legacy builder: it uses the local base as is (BuildKit would want buildx and try the registry).
build() {
  local image=$1 dir=$2 want=$3
  shift 3
  if up_to_date "$image" "$want"; then
    say "$image is present"
    return
  fi
  if present "$image"; then say "rebuilding $image: $dir changed since it was built"; else say "building $image from $dir"; fi
  DOCKER_BUILDKIT=0 docker build -q --force-rm --label "invoice-lifecycle.recipe=$want" --build-arg "BASE=$base_image" "$@" -t "$image" "$dir" >/dev/null
  say "$image built"
}
build "$postgres_image" scripts/test-images/postgres "$postgres_recipe" --build-arg "PG_MAJOR=$pg_major"
build "$redis_image" scripts/test-images/redis "$redis_recipe"
