// Net: the pool that blob diffs share during backward on the CPU (Note
// [Shared diffs]).
#include <algorithm>
#include <climits>
#include <map>

#include "poseidon/net.hpp"

namespace poseidon {

// Note [Shared diffs]
// Caffe gives every blob a diff as large as its data and keeps it for the
// net's lifetime. Most of them hold something only for a short stretch of
// the backward pass: a blob's diff is first written by the backward of its
// last reader (the highest layer that has it as a bottom) and last read by
// the backward of its producer (the lowest layer that has it as a top).
// With the layers that touch blob b spanning [lo(b), hi(b)], two blobs
// whose spans do not overlap can use the same memory. On ResNet-50 at
// batch 8 the diffs are about half of the net's memory; pooled they take a
// few activations' worth.
//
// The plan. Blobs that alias one diff (Flatten, Reshape, one-top Slice and
// one-bottom Concat share their top's diff with their bottom) form a group
// with the union of their spans. A group is pooled when none of its blobs
// is a net input or output, a loss top, a top of a layer without bottoms
// (the gradient a data layer's top receives is what saliency scripts
// read), kept (KeepDiff: the synchroniser keeps the tops whose diff it
// sends as a sufficient factor, possibly after the pass), and when each
// blob's last reader writes its gradient (bottom_need_backward). That last
// condition matters: Caffe zeroes a diff when it is first allocated, and a
// diff nobody writes (a Split top feeding only an Accuracy layer) is read
// as zeros by the layer below; a pooled one would hold another blob's
// gradient. Layers overwrite the bottom diffs they compute (they must in
// Caffe too, where a diff keeps the last iteration's values), so nothing
// else needs clearing.
//
// Pass-through. Some layers' backward needs no memory of its own for a
// bottom's diff: Eltwise SUM gives a bottom with coefficient 1 dE/dy
// itself, and Split sums its tops' diffs into its bottom's, which may as
// well be top 0's diff summed in place. Such a layer names the top
// (Layer::BottomDiffSharesTop), and where the bottom's group is touched by
// no layer above it and the top's by none below it, the two groups become
// one: the memory holds the top's diff until this layer's backward and
// the bottom's after it. Eltwise then skips the bottom whose diff is dE/dy
// (a copy less per ResNet shortcut), Split adds into top 0's diff in
// place. Only one bottom of a layer joins a given top: two bottoms on one
// memory would see each other's gradients once the layers below them
// write their diffs in place. Chains join in layer order (a Split's bottom,
// its top 0 read by an Eltwise, that Eltwise's top). Released, each set of
// blobs that shared a diff before pooling gets its own memory again.
//
// Groups are placed largest first at the lowest offset free of every
// placed group whose span overlaps theirs (64-byte aligned); each group
// gets a SyncedMemory viewing its part of the pool (Blob::SetDiffMemory),
// and the views keep the pool alive. The plan is kept while the blobs'
// diff memories and counts stay as they were bound; a reshape, a
// set_cpu_data or a KeepDiff makes the next backward pass plan again.
//
// Only on the CPU: a GPU pass first gives the blobs their own diffs back
// (a pooled host view could be copied over a live one by a late
// device-to-host sync). Partial passes (BackwardFrom, BackwardTo) share too,
// which is why a pycaffe script that sets a top's diff and runs
// backward(start=...) should leave sharing off, as it is by default.

template <typename Dtype>
void Net<Dtype>::KeepDiff(const string& blob_name) {
  const auto it = blob_names_index_.find(blob_name);
  POSEIDON_REQUIRE(it != blob_names_index_.end(), Error, "net ", name_,
                   " has no blob named '", blob_name, "'");
  if (kept_diffs_.insert(it->second).second) diff_pool_key_.clear();
}

template <typename Dtype>
int Net<Dtype>::num_pooled_diffs() const {
  int n = 0;
  for (const DiffGroup& g : diff_groups_) n += static_cast<int>(g.blobs.size());
  return n;
}

template <typename Dtype>
bool Net<Dtype>::diff_pooled(int blob_id) const {
  for (const DiffGroup& g : diff_groups_) {
    for (int b : g.blobs) {
      if (b == blob_id) return blobs_[b]->diff() == g.memory;
    }
  }
  return false;
}

template <typename Dtype>
vector<std::pair<const SyncedMemory*, int>> Net<Dtype>::DiffPoolKey() const {
  vector<std::pair<const SyncedMemory*, int>> key(blobs_.size());
  for (size_t b = 0; b < blobs_.size(); ++b) {
    key[b] = {blobs_[b]->diff().get(), blobs_[b]->count()};
  }
  return key;
}

template <typename Dtype>
bool Net<Dtype>::DiffPoolCurrent() const {
  if (diff_pool_key_.size() != blobs_.size()) return false;
  for (size_t b = 0; b < blobs_.size(); ++b) {
    if (diff_pool_key_[b].first != blobs_[b]->diff().get() ||
        diff_pool_key_[b].second != blobs_[b]->count()) {
      return false;
    }
  }
  return true;
}

template <typename Dtype>
void Net<Dtype>::PrepareDiffPool() {
  if (!share_diffs_ || Poseidon::mode() != Poseidon::CPU ||
      !backward_replacements_.empty()) {
    if (!diff_groups_.empty()) ReleaseDiffPool();
    return;
  }
  if (DiffPoolCurrent()) return;
  ReleaseDiffPool();
  PlanDiffPool();
  diff_pool_key_ = DiffPoolKey();
}

template <typename Dtype>
void Net<Dtype>::ReleaseDiffPool() {
  for (DiffGroup& g : diff_groups_) {
    // One memory per set of blobs that aliased one diff before pooling.
    std::map<int, shared_ptr<SyncedMemory>> own;
    for (size_t i = 0; i < g.blobs.size(); ++i) {
      const int b = g.blobs[i];
      // A blob reshaped past its capacity already has its own diff.
      if (blobs_[b]->diff() != g.memory) continue;
      shared_ptr<SyncedMemory>& memory = own[g.alias[i]];
      if (memory == nullptr) memory = std::make_shared<SyncedMemory>(g.bytes);
      blobs_[b]->SetDiffMemory(memory);
    }
  }
  diff_groups_.clear();
  diff_pool_key_.clear();
  diff_pool_bytes_ = 0;
  pooled_diff_bytes_ = 0;
}

template <typename Dtype>
void Net<Dtype>::PlanDiffPool() {
  const int num_blobs = static_cast<int>(blobs_.size());
  const int num_layers = static_cast<int>(layers_.size());
  vector<int> lo(num_blobs, INT_MAX);
  vector<int> hi(num_blobs, -1);
  vector<int> last_reader(num_blobs, -1);
  vector<bool> poolable(num_blobs, true);
  for (int l = 0; l < num_layers; ++l) {
    for (int id : top_id_vecs_[l]) {
      lo[id] = std::min(lo[id], l);
      hi[id] = std::max(hi[id], l);
      if (bottom_id_vecs_[l].empty()) poolable[id] = false;
    }
    for (int id : bottom_id_vecs_[l]) {
      hi[id] = std::max(hi[id], l);
      last_reader[id] = l;
    }
  }
  for (int b = 0; b < num_blobs; ++b) {
    const int r = last_reader[b];
    if (lo[b] == INT_MAX || r < 0 || r < hi[b] || !layer_need_backward_[r] ||
        blob_loss_weights_[b] != Dtype(0) || kept_diffs_.count(b) != 0) {
      poolable[b] = false;
      continue;
    }
    for (size_t k = 0; k < bottom_id_vecs_[r].size(); ++k) {
      if (bottom_id_vecs_[r][k] == b && !bottom_need_backward_[r][k]) {
        poolable[b] = false;
      }
    }
  }
  for (int b : net_input_blob_indices_) poolable[b] = false;
  for (int b : net_output_blob_indices_) poolable[b] = false;

  // Groups of blobs aliasing one diff; a group is pooled only whole.
  vector<DiffGroup> groups;
  vector<bool> group_poolable;
  std::map<const SyncedMemory*, size_t> group_of;
  for (int b = 0; b < num_blobs; ++b) {
    const size_t bytes =
        static_cast<size_t>(blobs_[b]->count()) * sizeof(Dtype);
    auto found = group_of.find(blobs_[b]->diff().get());
    if (found == group_of.end()) {
      found = group_of.emplace(blobs_[b]->diff().get(), groups.size()).first;
      groups.push_back(DiffGroup{{}, {}, INT_MAX, -1, 0, 0, nullptr});
      group_poolable.push_back(true);
    }
    DiffGroup& g = groups[found->second];
    g.blobs.push_back(b);
    g.alias.push_back(static_cast<int>(found->second));
    g.first_layer = std::min(g.first_layer, lo[b]);
    g.last_layer = std::max(g.last_layer, hi[b]);
    g.bytes = std::max(g.bytes, bytes);
    group_poolable[found->second] =
        group_poolable[found->second] && poolable[b];
  }
  MergePassThroughGroups(&groups, &group_poolable, group_of);
  vector<DiffGroup> pooled;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (group_poolable[i] && groups[i].bytes > 0) {
      pooled.push_back(std::move(groups[i]));
    }
  }
  if (pooled.empty()) return;

  // Largest first, each at the lowest aligned offset clear of the placed
  // groups whose spans overlap its own.
  std::stable_sort(
      pooled.begin(), pooled.end(),
      [](const DiffGroup& a, const DiffGroup& b) { return a.bytes > b.bytes; });
  constexpr size_t kAlign = 64;
  size_t pool_bytes = 0;
  size_t apart_bytes = 0;
  for (size_t i = 0; i < pooled.size(); ++i) {
    DiffGroup& g = pooled[i];
    vector<std::pair<size_t, size_t>> taken;  // [begin, end) of overlapping
    for (size_t j = 0; j < i; ++j) {
      const DiffGroup& p = pooled[j];
      if (p.first_layer <= g.last_layer && g.first_layer <= p.last_layer) {
        taken.emplace_back(p.offset, p.offset + p.bytes);
      }
    }
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (const auto& t : taken) {
      if (offset + g.bytes <= t.first) break;
      offset = std::max(offset, (t.second + kAlign - 1) / kAlign * kAlign);
    }
    g.offset = offset;
    pool_bytes = std::max(pool_bytes, offset + g.bytes);
    apart_bytes += g.bytes;
  }

  auto pool = std::make_shared<SyncedMemory>(pool_bytes);
  char* base = static_cast<char*>(pool->mutable_cpu_data());
  for (DiffGroup& g : pooled) {
    // The view's deleter holds the pool: a blob that outlives the net (held
    // from Python) still points at live memory.
    g.memory = shared_ptr<SyncedMemory>(
        new SyncedMemory(g.bytes), [pool](SyncedMemory* view) { delete view; });
    g.memory->set_cpu_data(base + g.offset);
    for (int b : g.blobs) blobs_[b]->SetDiffMemory(g.memory);
  }
  diff_groups_ = std::move(pooled);
  diff_pool_bytes_ = pool_bytes;
  pooled_diff_bytes_ = apart_bytes;
  if (!diff_pool_logged_) {
    diff_pool_logged_ = true;
    LOG_IF(INFO, Poseidon::root_solver())
        << "Net " << name_ << ": " << num_pooled_diffs() << " blob diffs share "
        << (pool_bytes >> 20) << " MiB (" << (apart_bytes >> 20)
        << " MiB apart)";
  }
}

template <typename Dtype>
void Net<Dtype>::MergePassThroughGroups(
    vector<DiffGroup>* groups, vector<bool>* group_poolable,
    const std::map<const SyncedMemory*, size_t>& group_of) const {
  // A merged group forwards to the one it joined.
  vector<size_t> joined(groups->size());
  for (size_t g = 0; g < joined.size(); ++g) joined[g] = g;
  auto find = [&](const Blob<Dtype>& blob) {
    size_t g = group_of.at(blob.diff().get());
    while (joined[g] != g) g = joined[g];
    return g;
  };
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {
    const vector<int>& bottoms = bottom_id_vecs_[l];
    const vector<int>& tops = top_id_vecs_[l];
    for (int k = 0; k < static_cast<int>(bottoms.size()); ++k) {
      const int j = layers_[l]->BottomDiffSharesTop(k);
      if (j < 0 || j >= static_cast<int>(tops.size())) continue;
      const int b = bottoms[k], t = tops[j];
      if (std::count(bottoms.begin(), bottoms.end(), b) != 1 ||
          std::count(tops.begin(), tops.end(), b) != 0 ||
          std::count(bottoms.begin(), bottoms.end(), t) != 0 ||
          blobs_[b]->count() != blobs_[t]->count()) {
        continue;
      }
      const size_t gb = find(*blobs_[b]), gt = find(*blobs_[t]);
      DiffGroup& below = (*groups)[gb];
      DiffGroup& above = (*groups)[gt];
      // Nothing above this layer touches the bottom's group and nothing
      // below it the top's: one diff ends where the other begins.
      if (gb == gt || !(*group_poolable)[gb] || !(*group_poolable)[gt] ||
          below.last_layer != l || above.first_layer != l) {
        continue;
      }
      below.blobs.insert(below.blobs.end(), above.blobs.begin(),
                         above.blobs.end());
      below.alias.insert(below.alias.end(), above.alias.begin(),
                         above.alias.end());
      below.last_layer = above.last_layer;
      below.bytes = std::max(below.bytes, above.bytes);
      above.blobs.clear();
      above.alias.clear();
      above.bytes = 0;
      (*group_poolable)[gt] = false;
      joined[gt] = gb;
    }
  }
}

#define POSEIDON_INSTANTIATE_NET_DIFFS(Dtype)             \
  template void Net<Dtype>::KeepDiff(const string&);      \
  template int Net<Dtype>::num_pooled_diffs() const;      \
  template bool Net<Dtype>::diff_pooled(int) const;       \
  template auto Net<Dtype>::DiffPoolKey()                 \
      const->vector<std::pair<const SyncedMemory*, int>>; \
  template bool Net<Dtype>::DiffPoolCurrent() const;      \
  template void Net<Dtype>::PrepareDiffPool();            \
  template void Net<Dtype>::ReleaseDiffPool();            \
  template void Net<Dtype>::PlanDiffPool();               \
  template void Net<Dtype>::MergePassThroughGroups(       \
      vector<DiffGroup>*, vector<bool>*,                  \
      const std::map<const SyncedMemory*, size_t>&) const;
POSEIDON_INSTANTIATE_NET_DIFFS(float)
POSEIDON_INSTANTIATE_NET_DIFFS(double)
#undef POSEIDON_INSTANTIATE_NET_DIFFS

}  // namespace poseidon
