#!/bin/bash
# Records the op-coverage traces (graphs/op_models.py: activations, padding and resampling, broadcast
# binary ops; writes into views (slices, bool masks, masked_scatter_); adaptive max pooling; unfold/fold; grid_sample, affine_grid, circular pad; upsample modes; 3-D convolution and pooling; transposed convolution 1-D/2-D/3-D; vector norms; binary_cross_entropy; channel and alpha dropout; mlp with elementwise losses; 1-D pooling and tensor_split; instance norm and an in-place bernoulli_; max pooling with indices into MaxUnpool 1-D/2-D/3-D; fractional max pooling; LP pooling; EmbeddingBag sum and max; Threshold, flip, maximum, var; PixelShuffle/Unshuffle; Bilinear; the multi(label) margin losses; ChannelShuffle (2.x only); CrossMapLRN2d; Dropout3d of 4-D and 5-D inputs; composite losses and distances) under PyTorch 2.13 (the .venv) into
# tests/data/traces_ops_2_13 and under 1.13 (Debian's /usr/bin/python3) into tests/data/traces_ops_1_13,
# and exports the graphs each set is checked on under the same torch (tools/validate.py table_ops).
#   tests/oracle/record_ops.sh [DATADIR]   (PY213=..., PY113=... pick the interpreters)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${1:-$root/tests/data}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
record() {  # record PYTHON OUTDIR [--check-spy]
  local py=$1 out=$2; shift 2
  mkdir -p "$out/graphs"
  run() { local name=$1; shift
    OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_step.py" "$@" "$out/$name.trace" "${extra[@]}"; }
  local extra=("$@")
  run act_mlp_a_b64_adam        act_mlp_a --batch 64 --opt adam --marks
  run act_mlp_b_b64_adam        act_mlp_b --batch 64 --opt adam --marks
  run clamp_abs_mlp_b64_sgd     clamp_abs_mlp --batch 64 --opt sgd --marks
  run scale_mlp_b64_adam        scale_mlp --batch 64 --opt adam --marks
  run resample_cnn_b16_sgd      resample_cnn --batch 16 --opt sgd --marks
  run conv3d_net_b4_sgd         conv3d_net --batch 4 --opt sgd --marks
  run dcgan_gen_b4_sgd          dcgan_gen --batch 4 --opt sgd --marks
  run deconv1d_net_b4_sgd       deconv1d_net --batch 4 --opt sgd --marks
  run unet3d_b2_sgd             unet3d --batch 2 --opt sgd --marks
  run deconv_net_b2_sgd         deconv_net --batch 2 --opt sgd --marks
  run resample_modes_b4_sgd     resample_modes --batch 4 --opt sgd --marks
  run norm_mlp_b16_sgd          norm_mlp --batch 16 --opt sgd --marks
  run drop_cnn_b16_adam         drop_cnn --batch 16 --opt adam --marks
  run mlp_b64_adam_bce_logits   mlp --batch 64 --opt adam --loss bce_logits --marks
  run mlp_b64_sgd_smooth_l1     mlp --batch 64 --opt sgd --loss smooth_l1 --marks
  run mlp_b64_sgd_l1            mlp --batch 64 --opt sgd --loss l1 --marks
  run sigmoid_mlp_b64_adam_bce  sigmoid_mlp --batch 64 --opt adam --loss bce --marks
  run mlp_b64_sgd_huber         mlp --batch 64 --opt sgd --loss huber --marks
  run slice_assign_b16_sgd      slice_assign --batch 16 --opt sgd --marks
  run unfold_net_b4_sgd         unfold_net --batch 4 --opt sgd --marks
  run grid_net_b4_sgd           grid_net --batch 4 --opt sgd --marks
  run circ_pad_cnn_b4_adam      circ_pad_cnn --batch 4 --opt adam --marks
  run adaptive_max_net_b16_sgd  adaptive_max_net --batch 16 --opt sgd --marks
  run mask_write_b16_sgd        mask_write --batch 16 --opt sgd --marks
  run mha_self_net_b8_adam      mha_self_net --batch 8 --opt adam --marks
  run mha_cross_net_b8_adam     mha_cross_net --batch 8 --opt adam --marks
  run mha_distinct_net_b8_adam  mha_distinct_net --batch 8 --opt adam --marks
  run transformer_net_b8_adam   transformer_net --batch 8 --opt adam --marks
  run rrelu_mlp_b16_adam        rrelu_mlp --batch 16 --opt adam --marks
  run mlp_b64_adam_soft_margin  mlp --batch 64 --opt adam --loss soft_margin --marks
  run embbag_net_b16_adam       embbag_net --batch 16 --opt adam --marks
  run pool1d_net_b16_sgd        pool1d_net --batch 16 --opt sgd --marks
  run inorm_net_b8_adam         inorm_net --batch 8 --opt adam --marks
  run unpool_net_b4_sgd         unpool_net --batch 4 --opt sgd --marks
  run frac_pool_net_b4_sgd      frac_pool_net --batch 4 --opt sgd --marks
  run lp_pool_net_b4_sgd        lp_pool_net --batch 4 --opt sgd --marks
  run embbag_sum_max_net_b16_sgd embbag_sum_max_net --batch 16 --opt sgd --marks
  run misc_math_net_b64_sgd     misc_math_net --batch 64 --opt sgd --marks
  run pixel_shuffle_net_b4_sgd  pixel_shuffle_net --batch 4 --opt sgd --marks
  run bilinear_net_b64_sgd      bilinear_net --batch 64 --opt sgd --marks
  run mlp_b64_sgd_multi_margin  mlp --batch 64 --opt sgd --loss multi_margin --marks
  run mlp_b64_sgd_multilabel_margin mlp --batch 64 --opt sgd --loss multilabel_margin --marks
  run cross_map_lrn_net_b2_sgd  cross_map_lrn_net --batch 2 --opt sgd --marks
  run drop3d_net_b4_sgd         drop3d_net --batch 4 --opt sgd --marks
  local two=0  # 2.x only: PyTorch 1.13 has no derivative for channel_shuffle
  "$py" -c 'import sys, torch; sys.exit(torch.__version__.startswith("1."))' && two=1
  [ $two = 1 ] && run channel_shuffle_net_b4_sgd channel_shuffle_net --batch 4 --opt sgd --marks
  run pair_loss_mlp_b64_adam    pair_loss_mlp --batch 64 --opt adam --marks
  run nll_loss_mlp_b32_sgd      nll_loss_mlp --batch 32 --opt sgd --marks
  run sim_net_b16_sgd           sim_net --batch 16 --opt sgd --marks
  exp() { local name=$1 prov=$2; shift 2
    (cd "$root" && "$py" tools/export_torch.py "$@" --name "$name" --provenance "$prov" -o "$out/graphs/$name.json"); }
  for m in act_mlp_a act_mlp_b clamp_abs_mlp scale_mlp norm_mlp slice_assign mask_write; do
    exp $m "graphs/op_models.py $m; trace_step.py $m; input float32 [batch,256]" graphs/op_models.py:${m}_export \
      --input "x=batch,256" --loss cross_entropy
  done
  exp resample_cnn "graphs/op_models.py ResampleCnn; trace_step.py resample_cnn; input float32 [batch,3,16,16]" \
    graphs/op_models.py:resample_cnn_export --input "x=batch,3,16,16" --loss cross_entropy
  exp resample_modes "graphs/op_models.py ResampleModes; trace_step.py resample_modes; input float32 [batch,3,8,8]" \
    graphs/op_models.py:resample_modes_export --input "x=batch,3,8,8" --loss cross_entropy
  exp drop_cnn "graphs/op_models.py DropCnn; trace_step.py drop_cnn; input float32 [batch,3,16,16]" \
    graphs/op_models.py:drop_cnn_export --input "x=batch,3,16,16" --loss cross_entropy
  exp unfold_net "graphs/op_models.py UnfoldNet; trace_step.py unfold_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:unfold_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp adaptive_max_net "graphs/op_models.py AdaptiveMaxNet; trace_step.py adaptive_max_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:adaptive_max_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp mha_self_net "graphs/op_models.py MhaSelfNet; trace_step.py mha_self_net; input float32 [batch,8,16]" \
    graphs/op_models.py:mha_self_net_export --input "x=batch,8,16" --loss cross_entropy
  exp mha_cross_net "graphs/op_models.py MhaCrossNet; trace_step.py mha_cross_net; input float32 [batch,8,16]" \
    graphs/op_models.py:mha_cross_net_export --input "x=batch,8,16" --loss cross_entropy
  exp mha_distinct_net "graphs/op_models.py MhaDistinctNet; trace_step.py mha_distinct_net; input float32 [batch,8,16]" \
    graphs/op_models.py:mha_distinct_net_export --input "x=batch,8,16" --loss cross_entropy
  # under 2.x nn.Transformer's causal-mask detection reads the mask's values: exported by running
  # on CPU tensors, at the traced batch
  exp transformer_net "graphs/op_models.py TransformerNet; trace_step.py transformer_net; input float32 [batch,8,16]" \
    graphs/op_models.py:transformer_net_export --input "x=batch,8,16" --loss cross_entropy --set batch=8
  exp rrelu_mlp "graphs/op_models.py rrelu_mlp; trace_step.py rrelu_mlp; input float32 [batch,256]" \
    graphs/op_models.py:rrelu_mlp_export --input "x=batch,256" --loss cross_entropy
  exp mlp_soft_margin "graphs/models.py mlp with F.soft_margin_loss on float targets [batch,10]; trace_step.py mlp --loss soft_margin" \
    graphs/models.py:mlp --input "x=batch,1000" --loss graphs/op_models.py:soft_margin --target "batch,10"
  exp embbag_net "graphs/op_models.py EmbBagNet; trace_step.py embbag_net; input int64 ids [batch,8]" \
    graphs/op_models.py:embbag_net_export --input "ids=int64:batch,8@0:30522" --loss cross_entropy
  exp pool1d_net "graphs/op_models.py Pool1dNet; trace_step.py pool1d_net; input float32 [batch,4,32]" \
    graphs/op_models.py:pool1d_net_export --input "x=batch,4,32" --loss cross_entropy
  exp inorm_net "graphs/op_models.py InstNormNet; trace_step.py inorm_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:inorm_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp unpool_net "graphs/op_models.py UnpoolNet; trace_step.py unpool_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:unpool_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp frac_pool_net "graphs/op_models.py FracPoolNet; trace_step.py frac_pool_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:frac_pool_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp lp_pool_net "graphs/op_models.py LpPoolNet; trace_step.py lp_pool_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:lp_pool_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp embbag_sum_max_net "graphs/op_models.py EmbBagSumMaxNet; trace_step.py embbag_sum_max_net; input int64 ids [batch,8]" \
    graphs/op_models.py:embbag_sum_max_net_export --input "ids=int64:batch,8@0:30522" --loss cross_entropy
  exp misc_math_net "graphs/op_models.py MiscMathNet; trace_step.py misc_math_net; input float32 [batch,256]" \
    graphs/op_models.py:misc_math_net_export --input "x=batch,256" --loss cross_entropy
  exp pixel_shuffle_net "graphs/op_models.py PixelShuffleNet; trace_step.py pixel_shuffle_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:pixel_shuffle_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp bilinear_net "graphs/op_models.py BilinearNet; trace_step.py bilinear_net; input float32 [batch,256]" \
    graphs/op_models.py:bilinear_net_export --input "x=batch,256" --loss cross_entropy
  # 1.13's multi(label)_margin_loss has no meta kernel: exported by running on CPU tensors, at the traced batch
  exp mlp_multi_margin "graphs/models.py mlp with F.multi_margin_loss on class indices [batch]; trace_step.py mlp --loss multi_margin" \
    graphs/models.py:mlp --input "x=batch,1000" --loss graphs/op_models.py:multi_margin --target "int64:batch@0:10" --set batch=64
  exp mlp_multilabel_margin "graphs/models.py mlp with F.multilabel_margin_loss on int64 targets [batch,10]; trace_step.py mlp --loss multilabel_margin" \
    graphs/models.py:mlp --input "x=batch,1000" --loss graphs/op_models.py:multilabel_margin --target "int64:batch,10@0:10" --set batch=64
  exp drop3d_net "graphs/op_models.py Drop3dNet; trace_step.py drop3d_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:drop3d_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp cross_map_lrn_net "graphs/op_models.py CrossMapLrnNet; trace_step.py cross_map_lrn_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:cross_map_lrn_net_export --input "x=batch,3,16,16" --loss cross_entropy
  [ $two = 1 ] && exp channel_shuffle_net "graphs/op_models.py ChannelShuffleNet; trace_step.py channel_shuffle_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:channel_shuffle_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp pair_loss_mlp "graphs/op_models.py PairLossMlp; trace_step.py pair_loss_mlp; input float32 [batch,32]" \
    graphs/op_models.py:pair_loss_mlp_export --input "x=batch,32" --loss cross_entropy
  # F.gaussian_nll_loss reads torch.any(var < 0): exported by running on CPU tensors, at the traced batch
  exp nll_loss_mlp "graphs/op_models.py NllLossMlp; trace_step.py nll_loss_mlp; input float32 [batch,32]" \
    graphs/op_models.py:nll_loss_mlp_export --input "x=batch,32" --loss cross_entropy --set batch=32
  exp sim_net "graphs/op_models.py SimNet; trace_step.py sim_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:sim_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp grid_net "graphs/op_models.py GridNet; trace_step.py grid_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:grid_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp circ_pad_cnn "graphs/op_models.py CircPadCnn; trace_step.py circ_pad_cnn; input float32 [batch,3,16,16]" \
    graphs/op_models.py:circ_pad_cnn_export --input "x=batch,3,16,16" --loss cross_entropy
  exp conv3d_net "graphs/op_models.py Conv3dNet; trace_step.py conv3d_net; input float32 [batch,3,8,16,16]" \
    graphs/op_models.py:conv3d_net_export --input "x=batch,3,8,16,16" --loss cross_entropy
  exp dcgan_gen "graphs/op_models.py DcganGen; trace_step.py dcgan_gen; input float32 [batch,32,1,1]" \
    graphs/op_models.py:dcgan_gen_export --input "x=batch,32,1,1" --loss cross_entropy
  exp deconv1d_net "graphs/op_models.py Deconv1dNet; trace_step.py deconv1d_net; input float32 [batch,32,32]" \
    graphs/op_models.py:deconv1d_net_export --input "x=batch,32,32" --loss cross_entropy
  exp unet3d "graphs/op_models.py Unet3d; trace_step.py unet3d; input float32 [batch,3,8,16,16]" \
    graphs/op_models.py:unet3d_export --input "x=batch,3,8,16,16" --loss cross_entropy
  exp deconv_net "graphs/op_models.py DeconvNet; trace_step.py deconv_net; input float32 [batch,3,16,16]" \
    graphs/op_models.py:deconv_net_export --input "x=batch,3,16,16" --loss cross_entropy
  exp sigmoid_mlp_bce "graphs/op_models.py sigmoid_mlp with the bce loss on float targets [batch,10]; trace_step.py sigmoid_mlp --loss bce" \
    graphs/op_models.py:sigmoid_mlp_export --input "x=batch,256" --loss bce
  for l in bce_logits smooth_l1 l1 huber; do
    exp mlp_$l "graphs/models.py mlp with the $l loss on float targets [batch,10]; trace_step.py mlp --loss $l" \
      graphs/models.py:mlp --input "x=batch,1000" --loss $l
  done
}
record "${PY213:-$root/.venv/bin/python}" "$data/traces_ops_2_13" --check-spy
record "${PY113:-/usr/bin/python3}" "$data/traces_ops_1_13"
