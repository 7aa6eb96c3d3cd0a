#!/bin/bash
# Records the recurrent-layer traces (graphs/op_models.py: nn.LSTM / nn.GRU / nn.RNN classifiers, an
# embedding -> 2-layer LSTM with dropout, a bidirectional GRU tagger, a char-RNN with a ReLU RNN and a
# bias-free LSTM with proj_size, LSTMCell / GRUCell / RNNCell stepped in Python; Note [Recurrent layers])
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
record() {  # record PYTHON OUTDIR
  local py=$1 out=$2
  mkdir -p "$out/graphs"
  run() { local name=$1; shift
    OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_step.py" "$@" "$out/$name.trace"; }
  run lstm_cls_b8_sgd          lstm_cls --batch 8 --opt sgd
  run gru_cls_b8_sgd           gru_cls --batch 8 --opt sgd
  run rnn_cls_b8_adam          rnn_cls --batch 8 --opt adam
  run emb_lstm_cls_b8_adam     emb_lstm_cls --batch 8 --opt adam
  run bigru_tagger_b8_sgd      bigru_tagger --batch 8 --opt sgd
  run char_rnn_b8_momentum     char_rnn --batch 8 --opt momentum
  run cell_loop_b16_adam       cell_loop --batch 16 --opt adam
  exp() { local name=$1 input=$2 desc=$3
    (cd "$root" && "$py" tools/export_torch.py graphs/op_models.py:${name}_export --input "$input" \
      --loss cross_entropy --name "$name" --provenance "graphs/op_models.py $desc; trace_step.py $name" \
      -o "$out/graphs/$name.json"); }
  exp lstm_cls "x=batch,16,32" "LstmCls(nn.LSTM); input float32 [batch,16,32]"
  exp gru_cls "x=batch,16,32" "LstmCls(nn.GRU); input float32 [batch,16,32]"
  exp rnn_cls "x=batch,16,32" "LstmCls(nn.RNN); input float32 [batch,16,32]"
  exp emb_lstm_cls "ids=int64:batch,32" "EmbLstmCls; input int64 ids [batch,32]"
  exp bigru_tagger "ids=int64:batch,32" "BiGruTagger; input int64 ids [batch,32]"
  exp char_rnn "ids=int64:batch,32" "CharRnn; input int64 ids [batch,32]"
  exp cell_loop "x=batch,8,32" "CellLoop; input float32 [batch,8,32]"
}
record "${PY213:-$root/.venv/bin/python}" "$data/traces_rnn_2_13"
record "${PY113:-/usr/bin/python3}" "$data/traces_rnn_1_13"
