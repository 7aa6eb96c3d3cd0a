// FreeSet against std::set of (stream, size, address): the order and every search must be the
// same, for short lanes (searched by counting) and long ones (by halving), with many equal sizes.
#include "sim/allocator/free_set.h"

#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace memsim {
namespace {

using Item = std::tuple<FreeSet::Stream, int64_t, uint64_t>;  // (stream, size, address)

FreeSet::Key KeyOf(const Item& it) { return FreeSet::KeyOf(std::get<1>(it), std::get<2>(it)); }

// The ids of |ref| in order; an item's id is its address's index in |addresses|.
std::vector<FreeSet::Id> IdsOf(const std::set<Item>& ref, const std::vector<uint64_t>& addresses) {
  std::vector<FreeSet::Id> ids;
  for (const Item& it : ref) {
    auto a = std::lower_bound(addresses.begin(), addresses.end(), std::get<2>(it));
    ids.push_back(static_cast<FreeSet::Id>(a - addresses.begin()));
  }
  return ids;
}

// Drives a FreeSet and a std::set with the same random inserts, erases and replacements.
void RunRandom(uint32_t seed, size_t max_items, int64_t distinct_sizes) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> addresses;  // every address used, sorted; an address is used once at a time
  for (uint64_t a = 0; a < 4 * max_items; ++a) addresses.push_back((uint64_t{1} << 40) + a * 512);
  std::vector<bool> used(addresses.size(), false);
  FreeSet set;
  std::set<Item> ref;
  auto random_size = [&] { return 512 * static_cast<int64_t>(1 + rng() % distinct_sizes); };
  auto random_stream = [&]() -> FreeSet::Stream { return rng() % 4 == 0 ? 7 : 0; };
  auto random_free_address = [&] {
    size_t a;
    do a = rng() % addresses.size(); while (used[a]);
    return a;
  };
  for (int step = 0; step < 20000; ++step) {
    const unsigned op = static_cast<unsigned>(rng() % 3);
    if (op == 0 && ref.size() < max_items) {
      const size_t a = random_free_address();
      used[a] = true;
      const Item it{random_stream(), random_size(), addresses[a]};
      set.Insert(std::get<0>(it), KeyOf(it), static_cast<FreeSet::Id>(a));
      ref.insert(it);
    } else if (!ref.empty()) {
      auto victim = std::next(ref.begin(), static_cast<ptrdiff_t>(rng() % ref.size()));
      const Item old = *victim;
      ref.erase(victim);
      const size_t old_a = static_cast<size_t>((std::get<2>(old) - addresses[0]) / 512);
      if (op == 1) {
        set.Erase(std::get<0>(old), KeyOf(old));
        used[old_a] = false;
      } else {  // the block changes size (a merge or a split remainder), same stream and id
        const Item now{std::get<0>(old), random_size(), std::get<2>(old)};
        set.Replace(std::get<0>(old), KeyOf(old), KeyOf(now), static_cast<FreeSet::Id>(old_a));
        ref.insert(now);
      }
    }
    ASSERT_EQ(set.size(), ref.size()) << "step " << step;
    // A best-fit search for a random size in each stream.
    for (FreeSet::Stream s : {FreeSet::Stream{0}, FreeSet::Stream{7}}) {
      const int64_t want = random_size() - 256 * static_cast<int64_t>(rng() % 2);
      auto expect = ref.lower_bound(Item{s, want, 0});
      const FreeSet::Lane* lane = set.Find(s);
      if (lane == nullptr) {
        ASSERT_TRUE(expect == ref.end() || std::get<0>(*expect) != s);
        continue;
      }
      const size_t i = lane->LowerBoundSize(want);
      if (expect == ref.end() || std::get<0>(*expect) != s) {
        ASSERT_EQ(i, lane->size()) << "step " << step;
      } else {
        ASSERT_LT(i, lane->size()) << "step " << step;
        ASSERT_EQ(lane->key(i), KeyOf(*expect)) << "step " << step;
        ASSERT_EQ(lane->block_size(i), std::get<1>(*expect));
      }
    }
  }
  std::vector<FreeSet::Id> ids;
  set.ForEach([&](FreeSet::Id id) { ids.push_back(id); });
  EXPECT_EQ(ids, IdsOf(ref, addresses));
  for (const Item& it : ref) EXPECT_TRUE(set.Contains(std::get<0>(it), KeyOf(it)));
}

TEST(FreeSetTest, ShortLanesKeepStdSetOrder) { RunRandom(1, 20, 1000); }

TEST(FreeSetTest, LongLanesKeepStdSetOrder) { RunRandom(2, 300, 1000); }

TEST(FreeSetTest, ManyEqualSizesKeepAddressOrder) {
  RunRandom(3, 30, 3);
  RunRandom(4, 300, 5);
}

TEST(FreeSetTest, AMissingKeyIsAnError) {
  FreeSet set;
  set.Insert(0, FreeSet::KeyOf(1024, 4096), 1);
  // A failed MEMSIM_CHECK throws InternalError (lib/util/check.h), never aborts.
  EXPECT_THROW(set.Erase(0, FreeSet::KeyOf(1024, 8192)), InternalError);
  EXPECT_THROW(set.Erase(3, FreeSet::KeyOf(1024, 4096)), InternalError);
}

}  // namespace
}  // namespace memsim
