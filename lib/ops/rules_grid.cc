// Spatial transformers: `affine_grid` (F.affine_grid, aten::affine_grid_generator) and
// `grid_sample` (F.grid_sample, aten::grid_sampler_2d), 2-D (Note [Grid sampling] in
// docs/op-rules.md).
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

/// affine_grid: theta [N, 2, 3] and `size` [N, C, H, W] → grid [N, H, W, 2].
Status InferAffineGrid(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input (theta)");
  const TensorMeta& theta = *c.in[0];
  auto size = c.op.attrs.GetInts("size", c.bindings);
  if (!size || size->size() != 4) return RuleError(c, "\"size\" must be [N, C, H, W] (2-D grids only)");
  if (theta.sizes != std::vector<int64_t>{(*size)[0], 2, 3})
    return RuleError(c, "theta " + theta.ShapeString() + " must be [N, 2, 3]");
  o->Fresh(TensorMeta::Contiguous(theta.dtype, {(*size)[0], (*size)[2], (*size)[3], 2}));
  return Status::OK();
}

/// make_base_grid_4D (aten/src/ATen/native/AffineGridGenerator.cpp): the [N, H, W, 3] base grid,
/// then per axis (W, then H) `linspace(-1, 1, n)`, and without align_corners `range * (n - 1)`
/// and `/ n` (each a Scalar op: its wrapped number and, on the CPU, its cast in the grid's dtype,
/// measured under 1.13 and 2.13), the three n-sized tensors freed around the copy into the base
/// grid. Returns the base grid's index (an extra or a temp of |plan|).
template <typename Plan, typename Alloc, typename Free>
int BaseGrid(const RuleCtx& c, Plan* plan, Alloc alloc, Free free) {
  const auto size = *c.op.attrs.GetInts("size", c.bindings);
  const int64_t elem = ElementSize(c.in[0]->dtype);
  const int base = alloc(plan, size[0] * size[2] * size[3] * 3 * elem, "base grid");
  const bool scaled = !c.op.attrs.GetBool("align_corners", false);
  for (int64_t n : {size[3], size[2]}) {
    std::vector<int> ranges = {alloc(plan, n * elem, "linspace")};
    if (scaled) {
      for (const char* op : {"range * (n - 1)", "range / n"}) {
        int wrapped = -1, cast = -1;
        if (c.profile.scalar_operand_bytes > 0) {
          wrapped = alloc(plan, c.profile.scalar_operand_bytes, "wrapped scalar");
          cast = alloc(plan, elem, "scalar cast");
        }
        ranges.push_back(alloc(plan, n * elem, op));
        if (cast >= 0) free(plan, cast), free(plan, wrapped);
      }
    }
    for (int r : ranges) free(plan, r);
  }
  return base;
}

/// AffineGridGenerator keeps sizes only; the forward is the base grid times thetaᵀ (bmm).
void FwdAffineGrid(const RuleCtx& c, FwdPlan* p) {
  const int base = BaseGrid(c, p, [](FwdPlan* q, int64_t b, std::string_view l) { return q->AddExtra(b, l); },
                            [](FwdPlan* q, int k) { q->FreeExtra(k); });
  p->AllocOutput(0);
  p->FreeExtra(base);
}

/// affine_grid_generator_4D_backward: the base grid again, then `base_gridᵀ.bmm(grad)`, whose
/// [N, 3, 2] result is returned transposed (theta's view backward then copies it).
void BwdAffineGrid(const RuleCtx& c, BwdPlan* p) {
  const int base = BaseGrid(c, p, [](BwdPlan* q, int64_t b, std::string_view l) { return q->Temp(b, l); },
                            [](BwdPlan* q, int k) { q->FreeTemp(k); });
  if (c.rg_in(0)) {
    TensorMeta t = *c.in[0];
    t.strides = {6, 1, 2};  // [N, 3, 2] contiguous, transposed to [N, 2, 3]
    p->GradNewLike(0, std::move(t));
  }
  p->FreeTemp(base);
}

/// grid_sample: input [N, C, H, W], grid [N, Ho, Wo, 2] → [N, C, Ho, Wo].
Status InferGridSample(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 2) return RuleError(c, "expected (input, grid)");
  const TensorMeta& x = *c.in[0];
  const TensorMeta& g = *c.in[1];
  if (x.dim() != 4 || g.dim() != 4 || g.sizes[3] != 2 || g.sizes[0] != x.sizes[0])
    return RuleError(c, "expected a 4-D input and a [N, H, W, 2] grid (2-D sampling only), got " + x.ShapeString() +
                            " and " + g.ShapeString());
  if (g.dtype != x.dtype) return RuleError(c, "input and grid must have one dtype");
  o->Fresh(TensorMeta::Contiguous(x.dtype, {x.sizes[0], x.sizes[1], g.sizes[1], g.sizes[2]}));
  return Status::OK();
}

/// GridSampler2DBackward0 keeps input and grid (derivatives.yaml); grid_sampler_2d_backward
/// makes the input's grad (zeros) and then the grid's, each only when asked (output_mask).
void FwdGridSample(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 1);
  p->Save(SavedRef::kInput, 0);
}

constexpr uint32_t kFirst = 1u, kBoth = 3u;

}  // namespace

const std::vector<OpRule> kGridRules = {
    {OpKind::kAffineGrid, 1, 1, kFirst, InferAffineGrid, FwdAffineGrid, BwdAffineGrid},
    {OpKind::kGridSample, 2, 2, kBoth, InferGridSample, FwdGridSample, nullptr},
};

}  // namespace memsim
