// Loads the image codecs plugin (see image_codecs.hpp) and forwards to it.
#include "poseidon/util/image_codecs.hpp"

#include <dlfcn.h>

#include <mutex>

#include "poseidon/common.hpp"
#include "imgcodecs_plugin.hpp"

namespace poseidon {
namespace codecs {
namespace {

constexpr char kPluginName[] = "libposeidon_imgcodecs.so";

struct Plugin {
  ReadFn read = nullptr;
  DecodeFn decode = nullptr;
  EncodeFn encode = nullptr;
  WriteFn write = nullptr;
};

template <typename Fn>
Fn Symbol(void* handle, const char* name, const std::string& path) {
  void* symbol = dlsym(handle, name);
  POSEIDON_REQUIRE(symbol != nullptr, IOError, "image codecs plugin '", path,
                   "' has no ", name, " (a plugin of another Poseidon?)");
  return reinterpret_cast<Fn>(symbol);
}

// Opened once, never closed: OpenCV keeps state for the process's life.
const Plugin& Load() {
  static std::once_flag once;
  static Plugin plugin;
  static std::string error;
  std::call_once(once, [] {
    std::string path = PluginPath();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string first_error = handle ? "" : dlerror();
    if (handle == nullptr) {
      handle = dlopen(kPluginName, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) path = kPluginName;
    }
    if (handle == nullptr) {
      error = StrCat("cannot load the image codecs plugin (", first_error,
                     "; nor ", kPluginName,
                     " on the loader's path): reading or writing image files "
                     "needs it beside libposeidon.so");
      return;
    }
    try {
      plugin.read = Symbol<ReadFn>(handle, "poseidon_imgcodecs_read", path);
      plugin.decode =
          Symbol<DecodeFn>(handle, "poseidon_imgcodecs_decode", path);
      plugin.encode =
          Symbol<EncodeFn>(handle, "poseidon_imgcodecs_encode", path);
      plugin.write = Symbol<WriteFn>(handle, "poseidon_imgcodecs_write", path);
    } catch (const IOError& e) {
      plugin = Plugin();
      error = e.what();
    }
  });
  POSEIDON_REQUIRE(error.empty(), IOError, error);
  return plugin;
}

}  // namespace

std::string PluginPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&PluginPath), &info) != 0 &&
      info.dli_fname != nullptr) {
    const std::string library = info.dli_fname;
    const size_t slash = library.rfind('/');
    if (slash != std::string::npos) {
      return library.substr(0, slash + 1) + kPluginName;
    }
  }
  return kPluginName;
}

cv::Mat Read(const std::string& filename, int flags) {
  cv::Mat image;
  Load().read(filename, flags, &image);
  return image;
}

cv::Mat Decode(const cv::Mat& buffer, int flags) {
  cv::Mat image;
  Load().decode(buffer, flags, &image);
  return image;
}

bool Encode(const std::string& extension, const cv::Mat& image,
            std::vector<uchar>* bytes) {
  return Load().encode(extension, image, bytes);
}

bool Write(const std::string& filename, const cv::Mat& image) {
  return Load().write(filename, image);
}

}  // namespace codecs
}  // namespace poseidon
