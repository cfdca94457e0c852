#!/usr/bin/env bash
# Fetches the binary version of CIFAR-10 (cifar-10-binary.tar.gz, 162 MB,
# from the dataset's home page https://www.cs.toronto.edu/~kriz/cifar.html),
# checks its MD5 against the published one and puts data_batch_1.bin ..
# data_batch_5.bin, test_batch.bin and batches.meta.txt into this folder
# (data/cifar10/), as Caffe's data/cifar10/get_cifar10.sh does. Then run
# examples/cifar10/create_cifar10.sh. Runs from anywhere.
#
# Usage:
#   data/cifar10/get_cifar10.sh [ARCHIVE]
#
# ARCHIVE (or the environment variable CIFAR10_ARCHIVE) is a
# cifar-10-binary.tar.gz already on disk: for machines that cannot reach
# www.cs.toronto.edu (behind a proxy, or offline), fetch it elsewhere, copy it
# over and pass its path. Without one the script downloads the archive with
# curl (or wget); a proxy set in https_proxy / http_proxy is used by both.
# Either way the archive's MD5 must equal the published
# c32a1d4ab5d03f1284b67883e8d87530, else nothing is extracted. A downloaded
# archive is deleted after extraction; one you passed is left alone. When the
# six batches are already here and no ARCHIVE is given, nothing is done.
#
# Environment:
#   CIFAR10_ARCHIVE       as ARCHIVE above (the argument wins)
#   CIFAR10_DIR           where the files go (default: this script's folder)
#   CIFAR10_URL           where to download from (default: the home page's
#                         https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz)
#   CIFAR10_EXPECTED_MD5  replaces the published MD5 as the sum the archive must
#                         have: 32 hex digits, the MD5 of the file you pass
#                         (for a repackaged archive or a test's small stand-in;
#                         the tests use it). The check is never skipped: an
#                         empty or malformed value is an error, and a line
#                         says that the published sum was overridden.
#
# Exit status 0 on success; 1 with one "get_cifar10.sh: error: ..." line on
# stderr when the archive cannot be downloaded or found, has the wrong MD5,
# is not a gzip-compressed tar or lacks one of the files.
set -euo pipefail

PROG=get_cifar10.sh
PUBLISHED_MD5=c32a1d4ab5d03f1284b67883e8d87530
DEFAULT_URL=https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz
MEMBER_DIR=cifar-10-batches-bin
FILES=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin
       data_batch_5.bin test_batch.bin batches.meta.txt)
RECORD=3073  # bytes per image: 1 label byte + 3 x 32 x 32 pixels

die() { echo "$PROG: error: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${CIFAR10_DIR:-$HERE}"
URL="${CIFAR10_URL:-$DEFAULT_URL}"
if [ $# -gt 1 ]; then
  die "takes at most one argument, the path of cifar-10-binary.tar.gz (got $#)"
fi
ARCHIVE="${1:-${CIFAR10_ARCHIVE:-}}"

EXPECTED_MD5=$PUBLISHED_MD5
if [ -n "${CIFAR10_EXPECTED_MD5+set}" ]; then
  sum=$(printf '%s' "$CIFAR10_EXPECTED_MD5" | tr 'A-F' 'a-f')
  if ! [[ "$sum" =~ ^[0-9a-f]{32}$ ]]; then
    die "CIFAR10_EXPECTED_MD5='$CIFAR10_EXPECTED_MD5' is not an MD5 sum" \
        "(32 hex digits); it replaces the published $PUBLISHED_MD5 and" \
        "cannot switch the check off (unset it to use the published sum)"
  fi
  EXPECTED_MD5=$sum
  if [ "$EXPECTED_MD5" != "$PUBLISHED_MD5" ]; then
    echo "$PROG: note: expecting MD5 $EXPECTED_MD5 (CIFAR10_EXPECTED_MD5)" \
         "instead of the published $PUBLISHED_MD5" >&2
  fi
fi

md5_of() {
  if command -v md5sum > /dev/null; then
    md5sum < "$1" | cut -d' ' -f1
  elif command -v md5 > /dev/null; then
    md5 -q "$1"
  else
    die "neither md5sum nor md5 is installed, so '$1' cannot be checked"
  fi
}

mkdir -p "$OUT" || die "cannot create the folder '$OUT'"

if [ -z "$ARCHIVE" ]; then
  have_all=1
  for f in "${FILES[@]}"; do [ -s "$OUT/$f" ] || have_all=0; done
  if [ "$have_all" = 1 ]; then
    echo "$PROG: $OUT already holds the CIFAR-10 batches; nothing to do" \
         "(delete them to fetch again)"
    exit 0
  fi
fi

# Every scratch file lives in one folder inside $OUT, removed at exit.
SCRATCH=$(mktemp -d "$OUT/.get_cifar10.XXXXXX") ||
  die "cannot write in '$OUT'"
trap 'rm -rf "$SCRATCH"' EXIT

if [ -n "$ARCHIVE" ]; then
  [ -e "$ARCHIVE" ] || die "archive '$ARCHIVE' not found"
  [ -f "$ARCHIVE" ] && [ -r "$ARCHIVE" ] ||
    die "archive '$ARCHIVE' is not a readable file"
else
  ARCHIVE="$SCRATCH/cifar-10-binary.tar.gz"
  hint="fetch cifar-10-binary.tar.gz (MD5 $PUBLISHED_MD5) from"
  hint+=" https://www.cs.toronto.edu/~kriz/cifar.html on a machine that"
  hint+=" can, copy it here and run: $0 PATH/cifar-10-binary.tar.gz"
  echo "$PROG: downloading $URL ..."
  if command -v curl > /dev/null; then
    if ! curl -fsSL --connect-timeout 30 --retry 2 -o "$ARCHIVE" "$URL" \
        2> "$SCRATCH/download.err"; then
      why=$(grep -v '^[[:space:]]*$' "$SCRATCH/download.err" | tail -1)
      die "cannot download $URL (${why:-curl failed}); this machine may not" \
          "reach that host: $hint"
    fi
  elif command -v wget > /dev/null; then
    if ! wget -q --timeout=30 --tries=3 -O "$ARCHIVE" "$URL" \
        2> "$SCRATCH/download.err"; then
      why=$(grep -v '^[[:space:]]*$' "$SCRATCH/download.err" | tail -1)
      die "cannot download $URL (${why:-wget failed}); this machine may not" \
          "reach that host: $hint"
    fi
  else
    die "neither curl nor wget is installed to download $URL: $hint"
  fi
fi

actual=$(md5_of "$ARCHIVE")
if [ "$actual" != "$EXPECTED_MD5" ]; then
  die "'$ARCHIVE' has MD5 $actual but cifar-10-binary.tar.gz must have" \
      "$EXPECTED_MD5 ($( [ "$EXPECTED_MD5" = "$PUBLISHED_MD5" ] &&
      echo published || echo CIFAR10_EXPECTED_MD5)): a truncated download" \
      "or a different file; nothing was extracted"
fi

# The listing tells a damaged or foreign file from a tar that lacks members.
if ! tar -tzf "$ARCHIVE" > "$SCRATCH/listing" 2> "$SCRATCH/tar.err"; then
  why=$(grep -v -e '^[[:space:]]*$' -e '^tar: Child returned' \
          -e '^tar: Error is not recoverable' "$SCRATCH/tar.err" | head -1)
  die "'$ARCHIVE' is not a complete gzip-compressed tar" \
      "(${why:-tar failed}); nothing was extracted"
fi
for f in "${FILES[@]}"; do
  grep -qx "\(\./\)\?$MEMBER_DIR/$f" "$SCRATCH/listing" ||
    die "'$ARCHIVE' lacks $MEMBER_DIR/$f; it is not CIFAR-10's binary" \
        "version; nothing was extracted"
done

echo "$PROG: MD5 $actual ok; extracting into $OUT"
mkdir "$SCRATCH/x"
members=()
for f in "${FILES[@]}"; do
  members+=("$(grep -x "\(\./\)\?$MEMBER_DIR/$f" "$SCRATCH/listing" | head -1)")
done
tar -xzf "$ARCHIVE" -C "$SCRATCH/x" "${members[@]}" 2> "$SCRATCH/tar.err" ||
  die "cannot extract from '$ARCHIVE': $(head -1 "$SCRATCH/tar.err")"
ntrain=0
ntest=0
for f in "${FILES[@]}"; do
  file="$SCRATCH/x/$MEMBER_DIR/$f"
  if [ "${f%.bin}" != "$f" ]; then
    size=$(wc -c < "$file")
    if [ "$size" -eq 0 ] || [ $((size % RECORD)) -ne 0 ]; then
      die "'$ARCHIVE' member $MEMBER_DIR/$f is $size bytes, not a whole" \
          "number of $RECORD-byte CIFAR-10 records; nothing was extracted"
    fi
    case $f in
      data_batch_*) ntrain=$((ntrain + size / RECORD)) ;;
      test_batch.bin) ntest=$((size / RECORD)) ;;
    esac
  fi
done
# Every file is checked before any replaces what $OUT held.
for f in "${FILES[@]}"; do
  mv -f "$SCRATCH/x/$MEMBER_DIR/$f" "$OUT/$f"
done
echo "$PROG: done: $ntrain training and $ntest test images in" \
     "$OUT/{data_batch_1..5.bin,test_batch.bin}, class names in" \
     "$OUT/batches.meta.txt"
