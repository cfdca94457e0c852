// mpi_selftest: point-to-point messages under a real mpirun: sends and
// receives around the ring (eager and rendezvous sizes), tag matching,
// several threads at once, size mismatches and bad arguments named, batches
// (RecvAll, SendAll) that start every operation at once, and two-part
// messages.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mpi_selftest.hpp"

namespace poseidon {
namespace dist {
namespace selftest {

std::string SendRecvRing(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Large enough to need the rendezvous protocol.
  std::vector<int32_t> out(1 << 18, r), in(1 << 18, -1);
  Status sent;
  std::thread sender([&] {
    sent = c->Send(out.data(), out.size() * sizeof(int32_t), next, 1);
  });
  Status got = c->Recv(in.data(), in.size() * sizeof(int32_t), prev, 1);
  sender.join();
  if (!sent.ok()) return sent.message();
  if (!got.ok()) return got.message();
  for (int32_t v : in) {
    if (v != prev) return StrCat("received ", v, " instead of ", prev);
  }
  return "";
}

// SendRecv around the ring, both directions at once: a small (eager) and a
// rendezvous-sized message, then a size mismatch named on the receiver.
std::string SendRecvBothWays(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (size_t count : {size_t{3}, size_t{1} << 18}) {
    std::vector<int32_t> out(count, r), in(count, -1);
    std::string e = Expect(
        c->SendRecv(out.data(), count * 4, next, in.data(), count * 4, prev, 2),
        StrCat("SendRecv of ", count, " ints"));
    if (!e.empty()) return e;
    for (int32_t v : in) {
      if (v != prev) return StrCat("received ", v, " instead of ", prev);
    }
  }
  int32_t one = r;
  int64_t two = 0;
  Status s = c->SendRecv(&one, 4, next, &two, 8, prev, 3);
  if (s.ok()) return "a 4-byte message received as 8 bytes succeeded";
  if (!Contains(s.message(), StrCat("rank ", prev, " sent 4 bytes"))) {
    return StrCat("mismatch message does not name the sizes: ", s.message());
  }
  return "";
}

std::string TagMatching(Communicator* c) {
  if (c->size() < 2) return "";
  if (c->rank() == 0) {
    const int64_t a = 11, b = 22, d = 33;
    std::string e = Expect(c->Send(&a, 8, 1, 5), "send a");
    if (e.empty()) e = Expect(c->Send(&b, 8, 1, 6), "send b");
    if (e.empty()) e = Expect(c->Send(&d, 8, 1, 5), "send d");
    return e;
  }
  if (c->rank() != 1) return "";
  int64_t x = 0, y = 0, z = 0;
  std::string e = Expect(c->Recv(&x, 8, 0, 6), "recv tag 6");
  if (e.empty()) e = Expect(c->Recv(&y, 8, 0, 5), "recv tag 5");
  if (e.empty()) e = Expect(c->Recv(&z, 8, 0, 5), "recv tag 5 again");
  if (!e.empty()) return e;
  if (x != 22 || y != 11 || z != 33) {
    return StrCat("got ", x, ", ", y, ", ", z, " instead of 22, 11, 33");
  }
  return "";
}

std::string ConcurrentTags(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  constexpr int kTags = 4, kMessages = 20;
  std::vector<std::string> errors(2 * kTags);
  std::vector<std::thread> threads;
  for (int t = 0; t < kTags; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kMessages && errors[2 * t].empty(); ++i) {
        std::vector<int32_t> msg(1 + (i * 4099) % 70000, r * 1000 + t);
        msg[0] = i;
        errors[2 * t] = Expect(c->Send(msg.data(), msg.size() * 4, next, t),
                               StrCat("sender tag ", t));
      }
    });
    threads.emplace_back([&, t] {
      for (int i = 0; i < kMessages && errors[2 * t + 1].empty(); ++i) {
        std::vector<int32_t> msg(1 + (i * 4099) % 70000, -1);
        Status s = c->Recv(msg.data(), msg.size() * 4, prev, t);
        if (!s.ok()) {
          errors[2 * t + 1] = StrCat("receiver tag ", t, ": ", s.message());
        } else if (msg[0] != i ||
                   (msg.size() > 1 && msg[1] != prev * 1000 + t)) {
          errors[2 * t + 1] =
              StrCat("receiver tag ", t, ": message ", i, " arrived as ",
                     msg[0], "/", msg.size() > 1 ? msg[1] : 0);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) {
    if (!e.empty()) return e;
  }
  return "";
}

std::string SizeMismatch(Communicator* c) {
  if (c->size() < 2) return "";
  if (c->rank() == 0) {
    const double v[1] = {1.5};
    return Expect(c->Send(v, 8, 1, 7), "send");
  }
  if (c->rank() != 1) return "";
  double v[2];
  Status s = c->Recv(v, 16, 0, 7);
  if (s.ok()) return "a 16-byte Recv of an 8-byte message succeeded";
  if (!Contains(s.message(), "sent 8 bytes") ||
      !Contains(s.message(), "expected 16") ||
      !Contains(s.message(), "rank 0")) {
    return StrCat("unclear message: ", s.message());
  }
  return "";
}

std::string BadArguments(Communicator* c) {
  int v = 0;
  Status s = c->Send(&v, 4, c->size(), 0);
  if (s.ok() || !Contains(s.message(), "no such rank")) {
    return StrCat("Send to rank ", c->size(), ": ", s.message());
  }
  s = c->Recv(&v, 4, 0, -1);
  if (s.ok() || !Contains(s.message(), "tag")) {
    return StrCat("Recv with tag -1: ", s.message());
  }
  s = c->Broadcast(&v, 4, -2);
  if (s.ok()) return "Broadcast from root -2 succeeded";
  return "";
}

// RecvAll and SendAll start every op at once. Each rank sends two
// rendezvous-sized messages to the next rank and takes two from the
// previous one, the plain side in the opposite order to the batch: a
// RecvAll that waited for its first op before starting the second would
// wait for a sender blocked on the second (and SendAll likewise), so done
// one by one this times out; at once it completes. A RecvAll with a message
// nobody sends names the rank it waits for.
std::string BatchesRunAtOnce(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::seconds(2);
  MpiCommunicator c(options);
  const int n = c.size(), r = c.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t count = size_t{1} << 18;  // 1 MB: above any eager limit
  std::vector<int32_t> a(count, r), b(count, -r), got_a(count), got_b(count);
  auto check = [&](const char* what) -> std::string {
    for (size_t i = 0; i < count; i += 4099) {
      if (got_a[i] != prev || got_b[i] != -prev) {
        return StrCat(what, ": element ", i, " is ", got_a[i], " / ", got_b[i],
                      ", want ", prev, " / ", -prev);
      }
    }
    return "";
  };
  // Plain sends of b (tag 12) then a (tag 11); RecvAll asks for a first.
  Status sent;
  std::thread sender([&] {
    sent = c.Send(b.data(), count * 4, next, 12);
    if (sent.ok()) sent = c.Send(a.data(), count * 4, next, 11);
  });
  Status got = c.RecvAll({{got_a.data(), count * 4, prev, 11},
                          {got_b.data(), count * 4, prev, 12}});
  sender.join();
  std::string e = Expect(got, "RecvAll");
  if (e.empty()) e = Expect(sent, "plain sends to RecvAll");
  if (e.empty()) e = check("RecvAll");
  if (!e.empty()) return e;
  // SendAll of a then b; plain receives take b first.
  std::fill(got_a.begin(), got_a.end(), 0);
  std::fill(got_b.begin(), got_b.end(), 0);
  Status taken;
  std::thread receiver([&] {
    taken = c.Recv(got_b.data(), count * 4, prev, 14);
    if (taken.ok()) taken = c.Recv(got_a.data(), count * 4, prev, 13);
  });
  sent = c.SendAll(
      {{a.data(), count * 4, next, 13}, {b.data(), count * 4, next, 14}});
  receiver.join();
  e = Expect(sent, "SendAll");
  if (e.empty()) e = Expect(taken, "plain receives from SendAll");
  if (e.empty()) e = check("SendAll");
  if (!e.empty()) return e;
  e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // Only the message with tag 15 comes; the one with tag 16 never does.
  std::thread small([&] { sent = c.Send(&r, 4, next, 15); });
  int32_t x = -1, y = -1;
  got = c.RecvAll({{&x, 4, prev, 15}, {&y, 4, prev, 16}});
  small.join();
  e = Expect(sent, "the small send");
  if (!e.empty()) return e;
  if (got.ok()) return "a RecvAll with a message nobody sent succeeded";
  if (!Contains(got.message(), StrCat("Recv of 4 bytes from rank ", prev,
                                      " tag 16: timed out")) ||
      !Contains(got.message(), StrCat("waiting for rank ", prev))) {
    return StrCat("unclear message: ", got.message());
  }
  if (x != prev) return StrCat("the message that came holds ", x);
  return Expect(main_comm->Barrier(), "barrier after");
}

// Two-part messages (RecvOp / SendOp with buf2), above the eager limit:
// sent in two parts and received in one, sent in one and received in two,
// and a message of another total size refused naming both sizes.
std::string TwoPartMessages(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t count = size_t{1} << 18;  // 1 MB of int32 after the header
  const int64_t head = 1000 + r;
  std::vector<int32_t> body(count), whole(2 + count);
  for (size_t i = 0; i < count; ++i) body[i] = static_cast<int32_t>(i) * n + r;
  std::memcpy(whole.data(), &head, 8);
  std::memcpy(whole.data() + 2, body.data(), count * 4);
  // Each rank sends to the next while it receives from the previous.
  Status sent;
  std::thread sender([&] {
    sent = c->SendAll({{&head, 8, next, 21, body.data(), count * 4},
                       {whole.data(), whole.size() * 4, next, 22}});
  });
  std::vector<int32_t> got_whole(2 + count), got_body(count);
  int64_t got_head = 0;
  Status got = c->RecvAll({{got_whole.data(), got_whole.size() * 4, prev, 21},
                           {&got_head, 8, prev, 22, got_body.data(),
                            count * 4}});
  sender.join();
  std::string e = Expect(sent, "SendAll of two-part messages");
  if (e.empty()) e = Expect(got, "RecvAll of two-part messages");
  if (!e.empty()) return e;
  int64_t whole_head = 0;
  std::memcpy(&whole_head, got_whole.data(), 8);
  if (whole_head != 1000 + prev || got_head != 1000 + prev) {
    return StrCat("headers ", whole_head, " and ", got_head, ", want ",
                  1000 + prev);
  }
  for (size_t i = 0; i < count; i += 997) {
    const int32_t want = static_cast<int32_t>(i) * n + prev;
    if (got_whole[2 + i] != want || got_body[i] != want) {
      return StrCat("element ", i, " is ", got_whole[2 + i], " / ",
                    got_body[i], ", want ", want);
    }
  }
  // 8 bytes sent; 8 + 4 expected.
  sent = c->Send(&head, 8, next, 23);
  int32_t tail = 0;
  got = c->RecvAll({{&got_head, 8, prev, 23, &tail, 4}});
  e = Expect(sent, "the short send");
  if (!e.empty()) return e;
  if (got.ok()) return "a two-part receive took a message of 8 bytes for 12";
  if (!Contains(got.message(), "sent 8 bytes, this rank expected 12")) {
    return StrCat("unclear message: ", got.message());
  }
  return "";
}

// SendWindowed and RecvWindowed (Note [Sliding windows]): 24 two-part
// messages from each rank to the next, of 8 bytes to 256 KiB after the
// header (some above the eager limit), tags repeating every 3 so that one
// (peer, tag) comes back 8 times, through a window of 600 KB. Every
// message arrives whole and in place, done(k) runs with k growing to 24,
// and when it does the first k messages are all in.
std::string WindowsSlide(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  constexpr int kMessages = 24;
  auto count_of = [](int i) { return size_t{2} << (i % 17); };
  auto value = [](int from, int i, size_t j) {
    return static_cast<int32_t>(from * 1000003 + i * 7919 + j);
  };
  std::vector<int64_t> heads(kMessages), got_heads(kMessages, -1);
  std::vector<std::vector<int32_t>> bodies(kMessages), got(kMessages);
  std::vector<Communicator::SendOp> sends;
  std::vector<Communicator::RecvOp> recvs;
  for (int i = 0; i < kMessages; ++i) {
    heads[i] = 100 * r + i;
    bodies[i].resize(count_of(i));
    for (size_t j = 0; j < bodies[i].size(); ++j) {
      bodies[i][j] = value(r, i, j);
    }
    got[i].assign(count_of(i), -1);
    sends.push_back({&heads[i], 8, next, 40 + i % 3, bodies[i].data(),
                     bodies[i].size() * 4});
    recvs.push_back(
        {&got_heads[i], 8, prev, 40 + i % 3, got[i].data(), got[i].size() * 4});
  }
  std::vector<size_t> send_done, recv_done;
  std::string early;
  Status sent;
  std::thread sender([&] {
    sent = c->SendWindowed(sends, 600000, [&](size_t k) {
      send_done.push_back(k);
      return Status::OK();
    });
  });
  const Status received = c->RecvWindowed(recvs, 600000, [&](size_t k) {
    recv_done.push_back(k);
    for (size_t i = 0; i < k && early.empty(); ++i) {
      if (got_heads[i] != 100 * prev + static_cast<int64_t>(i)) {
        early = StrCat("done(", k, ") before message ", i, " was in");
      }
    }
    return Status::OK();
  });
  sender.join();
  std::string e = Expect(sent, "SendWindowed");
  if (e.empty()) e = Expect(received, "RecvWindowed");
  if (!e.empty()) return e;
  if (!early.empty()) return early;
  for (const auto* v : {&send_done, &recv_done}) {
    for (size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i] == 0 || (i > 0 && (*v)[i] <= (*v)[i - 1])) {
        return StrCat("done(k) not growing: k = ", (*v)[i], " after ",
                      i > 0 ? (*v)[i - 1] : 0);
      }
    }
    if (v->empty() || v->back() != static_cast<size_t>(kMessages)) {
      return StrCat("done(k) ended at ", v->empty() ? 0 : v->back(), ", want ",
                    kMessages);
    }
  }
  for (int i = 0; i < kMessages; ++i) {
    for (size_t j = 0; j < got[i].size(); j += 1 + got[i].size() / 7) {
      if (got[i][j] != value(prev, i, j)) {
        return StrCat("message ", i, " element ", j, " is ", got[i][j],
                      ", want ", value(prev, i, j));
      }
    }
  }
  return "";
}

}  // namespace selftest
}  // namespace dist
}  // namespace poseidon
