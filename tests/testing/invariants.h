// Invariant checkers for the pipeline's values, used by the tests (ninja's VerifyGraph style):
// each returns OK or a description of the first violation.
#ifndef MEMSIM_TESTS_TESTING_INVARIANTS_H_
#define MEMSIM_TESTS_TESTING_INVARIANTS_H_

#include "lib/ir/graph.h"
#include "lib/ops/bind.h"
#include "lib/stream/events.h"
#include "lib/util/status.h"

namespace memsim::testing {

/// Ids in range; each activation produced by exactly one op and that op lists it; ops in
/// execution order (inputs produced earlier); inputs/parameters/buffers lists agree with roles.
Status VerifyGraph(const Graph& g);
/// One meta per tensor; storage owners are fresh tensors produced no later; views fit in their
/// owner's storage; last_use after the producer.
Status VerifyBoundGraph(const Graph& g, const BoundGraph& b);
/// Every buffer allocated exactly once before it is freed, freed at most once; byte sizes
/// non-negative; phases never go back (but from backward to the next pass's forward).
Status VerifyEventStream(const EventStream& s);

}  // namespace memsim::testing

#endif  // MEMSIM_TESTS_TESTING_INVARIANTS_H_
