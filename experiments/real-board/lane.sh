#!/bin/bash
# One lane of the real-record board (issues: results on real records; a board a reviewer can trust).
#
#   experiments/real-board/lane.sh congress|arxiv        # from a checkout with its .venv; LFB_HOME as for lfb
#
# Builds the lane's snapshot from its mirror in ../shared/real (once), then runs its queue of 3-seed rows in order,
# one torch thread (two lanes share a 2-core machine). Every row resumes per seed and round; a finished seed and the
# reference rows it needed land under leaderboard/.runs/, which git keeps: commit them as they come, and the same
# command continues in a later session or on another machine. A row's entry appears under leaderboard/entries/
# when its three seeds are done; validate, render and commit it (docs/evaluation.md).
set -u
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export LFB_SPAN_TOKENIZER="${LFB_SPAN_TOKENIZER:-minilm-wordpiece}"
LFB="${LFB:-.venv/bin/lfb}"
REAL="${LFB_REAL:-../shared/real}"

case "${1:-}" in
  congress)
    SNAPSHOT=congress-2024-12-01-2025-01-03-dbe8225d
    BUILD=(--sources us --mirror "$REAL/us-congress-crec-170" --since 2024-12-01 --until 2025-01-03)
    EPS=(--delta 3e-06)
    QUEUE=(
      # a row on the board first gets its matched no-signal control (its releases shuffled; never ranked), cheapest first
      "pe --epsilon 4" "pe --epsilon 4 --shuffled-releases" "weak-client-voting --epsilon 4"
      "popri --epsilon 4 --shuffled-releases" "dp-resample --epsilon 4" "pe-sft --epsilon 4" "ctcl --epsilon 4"
      "pe-sft --epsilon 4 --shuffled-releases"
      "dp-resample --epsilon 4 --shuffled-releases" "weak-client-voting --epsilon 4 --shuffled-releases"
      "ctcl --epsilon 4 --shuffled-releases"
      # the leaders at POPri's compute, beside their full rows
      "dp-resample --epsilon 4 --preset matched" "ctcl --epsilon 4 --preset matched"
      "weak-client-voting --epsilon 4 --preset matched"
      # the ε sweep
      "dp-fedavg --epsilon 1" "popri --epsilon 1" "pe --epsilon 1" "dp-resample --epsilon 1"
      "dp-fedavg --epsilon 8" "popri --epsilon 8" "pe --epsilon 8" "dp-resample --epsilon 8"
    ) ;;
  arxiv)
    SNAPSHOT=arxiv-qbio-2025-11-01-2026-08-08-ea3ee8d2
    BUILD=(--sources arxiv --mirror "$REAL/arxiv-qbio" --since 2025-11-01 --until 2026-08-08 --public-months 5)
    EPS=()
    QUEUE=(
      # the non-private row first: its seeds are the reference rows every other row needs
      "non-private" "public" "real-at-budget" "generator-only"
      "dp-fedavg --epsilon 4" "popri --epsilon 4" "pe --epsilon 4" "dp-resample --epsilon 4"
      "popri --epsilon 4 --shuffled-releases" "pe --epsilon 4 --shuffled-releases"
      "dp-resample --epsilon 4 --shuffled-releases"
    ) ;;
  *) echo "usage: $0 congress|arxiv" >&2; exit 2 ;;
esac

if ! "$LFB" data info "$SNAPSHOT" --quiet >/dev/null 2>&1; then
  echo "=== $(date -u +%FT%T) building $SNAPSHOT from the mirror"
  "$LFB" refresh "${BUILD[@]}" || exit $?
  "$LFB" data info "$SNAPSHOT" --quiet >/dev/null || { echo "the mirror built another snapshot than $SNAPSHOT" >&2; exit 1; }
fi
for row in "${QUEUE[@]}"; do
  echo "=== $(date -u +%FT%T) $row"
  # shellcheck disable=SC2086  # a row is the method and its flags
  "$LFB" eval --dataset "$SNAPSHOT" --profile cpu --seeds 0,1,2 --quiet ${EPS[@]+"${EPS[@]}"} --method $row
  echo "=== $(date -u +%FT%T) done (exit $?): $row"
done
