#!/bin/bash
# Records the recurrent-layer traces (graphs/op_models.py: nn.LSTM / nn.GRU / nn.RNN classifiers, an
# embedding -> 2-layer LSTM with dropout, a bidirectional GRU tagger, a char-RNN with a ReLU RNN and a
# bias-free LSTM with proj_size, LSTMCell / GRUCell / RNNCell stepped in Python, a bidirectional bias-free
# LSTM tagger; Notes [Recurrent layers], [oneDNN LSTM])
# under PyTorch 2.13 (the .venv) into tests/data/traces_rnn_2_13 and under 1.13 (Debian's
# /usr/bin/python3) into tests/data/traces_rnn_1_13, and exports the graphs each set is checked on
# under the same torch (tools/validate.py table_rnn).
#   tests/oracle/record_rnn.sh [DATADIR]   (PY213=..., PY113=... pick the interpreters)
# No --marks / --check-spy: under a TorchDispatchMode PyTorch sums a tensor's grads out of place, and a
# recurrent layer's weights get one grad per step (Note [InputBuffer]).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${1:-$root/tests/data}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
# The traces: name, model and options. nn.LSTM without proj_size takes oneDNN's mkldnn_rnn_layer under
# 2.x (Note [oneDNN LSTM]), the composite under 1.13; ONEDNN are the LSTM models recorded under 2.13
# only (a bidirectional bias-free LSTM, and batch 130, where oneDNN's forward stops merging the gates).
ALL="gru_cls_b8_sgd:gru_cls:sgd:8 rnn_cls_b8_adam:rnn_cls:adam:8 bigru_tagger_b8_sgd:bigru_tagger:sgd:8
     char_rnn_b8_momentum:char_rnn:momentum:8 cell_loop_b16_adam:cell_loop:adam:16"
LSTM="lstm_cls_b8_sgd:lstm_cls:sgd:8 emb_lstm_cls_b8_adam:emb_lstm_cls:adam:8"
ONEDNN="bilstm_tagger_b8_adam:bilstm_tagger:adam:8 lstm_cls_b130_sgd:lstm_cls:sgd:130"
declare -A INPUT=([lstm_cls]="x=batch,16,32" [gru_cls]="x=batch,16,32" [rnn_cls]="x=batch,16,32"
                  [emb_lstm_cls]="ids=int64:batch,32" [bigru_tagger]="ids=int64:batch,32" [char_rnn]="ids=int64:batch,32"
                  [cell_loop]="x=batch,8,32" [bilstm_tagger]="ids=int64:batch,32")
record() {  # record PYTHON OUTDIR SPECS...
  local py=$1 out=$2; shift 2
  mkdir -p "$out/graphs"
  for spec in "$@"; do
    IFS=: read -r name model opt batch <<< "$spec"
    OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_step.py" "$model" --batch "$batch" \
      --opt "$opt" "$out/$name.trace"
    [ -e "$out/graphs/$model.json" ] || (cd "$root" && "$py" tools/export_torch.py graphs/op_models.py:${model}_export \
      --input "${INPUT[$model]}" --loss cross_entropy --name "$model" \
      --provenance "graphs/op_models.py $model; trace_step.py $model; input ${INPUT[$model]}" -o "$out/graphs/$model.json")
  done
}
record "${PY213:-$root/.venv/bin/python}" "$data/traces_rnn_2_13" $LSTM $ONEDNN $ALL
record "${PY113:-/usr/bin/python3}" "$data/traces_rnn_1_13" $LSTM $ALL
