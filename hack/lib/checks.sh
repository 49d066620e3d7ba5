#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Sourced by the repository checks (hack/verify-*.sh): what they share.

# check_root parses a check's options, [-C DIR], where DIR is any directory
# inside the repository to check (default: the check's own), leaves the
# other arguments in ARGS, and changes to that repository's root. usage is
# the check's usage line; a bad option prints it and exits 2, as does a DIR
# outside a git repository.
check_root() {
  local usage=$1
  shift
  local dir opt OPTIND=1
  dir=$(dirname "${BASH_SOURCE[-1]}")
  while getopts ":C:h" opt; do
    case "${opt}" in
      C) dir=${OPTARG} ;;
      *)
        echo "usage: ${usage}" >&2
        exit 2
        ;;
    esac
  done
  shift $((OPTIND - 1))
  ARGS=("$@")
  local root
  root=$(git -C "${dir}" rev-parse --show-toplevel 2>/dev/null) || {
    echo "$0: ${dir} is not inside a git repository" >&2
    exit 2
  }
  cd "${root}"
}

# check_root_only is check_root for a check that takes no other argument.
check_root_only() {
  local usage=$1
  check_root "$@"
  if [[ ${#ARGS[@]} -ne 0 ]]; then
    echo "usage: ${usage}" >&2
    exit 2
  fi
}
