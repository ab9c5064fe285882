// An audio file decoded as llama.cpp's mtmd-helper decodes it (decode_audio_from_buf): the
// vendored miniaudio with the same defines, asked for mono f32 at the given rate, the length
// taken from ma_decoder_get_length_in_pcm_frames and the buffer kept at that length whatever
// the read returned. Writes the samples as raw little-endian f32 to OUT and prints one JSON
// line: {"ok":true,"frames":N,"framesRead":M} or {"ok":false,"step":"..."}.
//   llama_audio_decode FILE RATE OUT
#define MINIAUDIO_IMPLEMENTATION
#define MA_NO_ENCODING
#define MA_NO_DEVICE_IO
#define MA_NO_RESOURCE_MANAGER
#define MA_NO_NODE_GRAPH
#define MA_NO_ENGINE
#define MA_NO_GENERATION
#define MA_API static
#include "miniaudio/miniaudio.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

static int fail(const char * step) {
    std::printf("{\"ok\":false,\"step\":\"%s\"}\n", step);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s FILE RATE OUT\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int rate = std::atoi(argv[2]);

    ma_decoder_config config = ma_decoder_config_init(ma_format_f32, 1, rate);
    ma_decoder decoder;
    if (ma_decoder_init_memory(bytes.data(), bytes.size(), &config, &decoder) != MA_SUCCESS) return fail("init");
    ma_uint64 frames = 0, read = 0;
    if (ma_decoder_get_length_in_pcm_frames(&decoder, &frames) != MA_SUCCESS) {
        ma_decoder_uninit(&decoder);
        return fail("length");
    }
    std::vector<float> samples(frames);
    if (ma_decoder_read_pcm_frames(&decoder, samples.data(), frames, &read) != MA_SUCCESS) {
        ma_decoder_uninit(&decoder);
        return fail("read");
    }
    ma_decoder_uninit(&decoder);

    std::FILE * out = std::fopen(argv[3], "wb");
    if (!out || std::fwrite(samples.data(), sizeof(float), samples.size(), out) != samples.size() || std::fclose(out) != 0) {
        std::fprintf(stderr, "cannot write %s\n", argv[3]);
        return 1;
    }
    std::printf("{\"ok\":true,\"frames\":%llu,\"framesRead\":%llu}\n", (unsigned long long) frames, (unsigned long long) read);
    return 0;
}
