// A vector of trivially copyable values that lives inline up to N
// elements and only then moves to the heap: index tables and odometers of
// tensor ranks (almost always <= 8) without allocating per kernel call.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

namespace orrery::ops {

template <typename T, size_t N = 12>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallVec() = default;
  explicit SmallVec(size_t n, T value = T{}) { assign(n, value); }

  void assign(size_t n, T value) {
    size_ = n;
    if (n > N) heap_.assign(n, value);
    T* d = data();
    for (size_t i = 0; i < n; ++i) d[i] = value;
  }
  void push_back(T v) {
    if (size_ == N) heap_.assign(inline_, inline_ + N);
    if (size_ >= N) {
      heap_.push_back(v);
    } else {
      inline_[size_] = v;
    }
    ++size_;
  }
  T* data() { return size_ > N ? heap_.data() : inline_; }
  const T* data() const { return size_ > N ? heap_.data() : inline_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  size_t size_ = 0;
  T inline_[N] = {};
  std::vector<T> heap_;  // used only beyond N elements
};

}  // namespace orrery::ops
