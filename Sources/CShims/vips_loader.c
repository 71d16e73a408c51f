// libvips through dlopen (see include/ifw_vips.h for why). libvips's own headers are not used:
// they need glib's include paths, and a build against them would link libvips again. The few
// types and enum values below are libvips 8's stable ABI (the soname libvips.so.42 names it).
#include "ifw_vips.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

typedef struct ifw_vips_image VipsImage;

// VipsAccess, VipsFailOn, VipsSize and VipsInterpretation values (vips/image.h, foreign.h,
// resample.h), and GLogLevelFlags (glib/gmessages.h).
enum { ACCESS_SEQUENTIAL = 1, FAIL_ON_ERROR = 2, SIZE_FORCE = 3 };
enum { INTERPRETATION_B_W = 1, INTERPRETATION_sRGB = 22, INTERPRETATION_RGB16 = 25, INTERPRETATION_GREY16 = 26 };
enum { LOG_LEVEL_WARNING = 1 << 4, LOG_LEVEL_MESSAGE = 1 << 5, LOG_LEVEL_INFO = 1 << 6 };

typedef int (*loader_fn)(void *buffer, size_t length, VipsImage **out, ...);
typedef int (*operation_fn)(VipsImage *in, VipsImage **out, ...);

static struct {
    int (*init)(const char *argv0);
    void (*cache_set_max)(int);
    void (*cache_set_max_mem)(size_t);
    void (*cache_set_max_files)(int);
    void (*concurrency_set)(int);
    void (*block_untrusted_set)(int);
    unsigned (*log_set_handler)(const char *, int, void (*)(const char *, int, const char *, void *), void *);
    loader_fn load[6];
    int (*get_width)(const VipsImage *);
    int (*get_height)(const VipsImage *);
    int (*get_bands)(const VipsImage *);
    int (*get_interpretation)(const VipsImage *);
    int (*get_n_pages)(VipsImage *);
    int (*get_page_height)(VipsImage *);
    int (*get_orientation)(VipsImage *);
    int (*hasalpha)(VipsImage *);
    int (*avg)(VipsImage *in, double *out, ...);
    int (*thumbnail_image)(VipsImage *in, VipsImage **out, int width, ...);
    void *(*array_double_newv)(int n, ...);
    void (*area_unref)(void *);
    int (*flatten)(VipsImage *in, VipsImage **out, ...);
    int (*colourspace)(VipsImage *in, VipsImage **out, int space, ...);
    operation_fn cast_uchar;
    void (*error)(const char *domain, const char *format, ...);
    void *(*write_to_memory)(VipsImage *in, size_t *size);
    char *(*error_buffer_copy)(void);
    void *(*object_ref)(void *);
    void (*object_unref)(void *);
    void (*free)(void *);
} vips;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int started = -1;

static void quiet(const char *domain, int level, const char *message, void *data) {
    (void)domain; (void)level; (void)message; (void)data;
}

static void start_once(void) {
    // RTLD_LOCAL: libvips's symbols (and its 68 libraries') stay out of the global namespace.
    void *handle = dlopen("libvips.so.42", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) return;
    int missing = 0;
#define FIND(field, name) \
    do { \
        *(void **)&vips.field = dlsym(handle, name); \
        missing |= vips.field == NULL; \
    } while (0)
    FIND(init, "vips_init");
    FIND(cache_set_max, "vips_cache_set_max");
    FIND(cache_set_max_mem, "vips_cache_set_max_mem");
    FIND(cache_set_max_files, "vips_cache_set_max_files");
    FIND(concurrency_set, "vips_concurrency_set");
    FIND(block_untrusted_set, "vips_block_untrusted_set");
    FIND(log_set_handler, "g_log_set_handler");
    FIND(load[IFW_VIPS_JPEG], "vips_jpegload_buffer");
    FIND(load[IFW_VIPS_PNG], "vips_pngload_buffer");
    FIND(load[IFW_VIPS_GIF], "vips_gifload_buffer");
    FIND(load[IFW_VIPS_WEBP], "vips_webpload_buffer");
    FIND(load[IFW_VIPS_TIFF], "vips_tiffload_buffer");
    FIND(load[IFW_VIPS_HEIF], "vips_heifload_buffer");
    FIND(get_width, "vips_image_get_width");
    FIND(get_height, "vips_image_get_height");
    FIND(get_bands, "vips_image_get_bands");
    FIND(get_interpretation, "vips_image_get_interpretation");
    FIND(get_n_pages, "vips_image_get_n_pages");
    FIND(get_page_height, "vips_image_get_page_height");
    FIND(get_orientation, "vips_image_get_orientation");
    FIND(hasalpha, "vips_image_hasalpha");
    FIND(avg, "vips_avg");
    FIND(thumbnail_image, "vips_thumbnail_image");
    FIND(array_double_newv, "vips_array_double_newv");
    FIND(area_unref, "vips_area_unref");
    FIND(flatten, "vips_flatten");
    FIND(colourspace, "vips_colourspace");
    FIND(cast_uchar, "vips_cast_uchar");
    FIND(error, "vips_error");
    FIND(write_to_memory, "vips_image_write_to_memory");
    FIND(error_buffer_copy, "vips_error_buffer_copy");
    FIND(object_ref, "g_object_ref");
    FIND(object_unref, "g_object_unref");
    FIND(free, "g_free");
#undef FIND
    if (missing || vips.init("image-fetch-worker") != 0) return;
    vips.cache_set_max(0);
    vips.cache_set_max_mem(0);
    vips.cache_set_max_files(0);
    vips.concurrency_set(1);
    vips.block_untrusted_set(1);
    // A loader's warnings about a damaged body would go to stderr; the failure itself is returned.
    vips.log_set_handler("VIPS", LOG_LEVEL_WARNING | LOG_LEVEL_MESSAGE | LOG_LEVEL_INFO, quiet, NULL);
    started = 0;
}

int ifw_vips_start(void) {
    pthread_once(&once, start_once);
    return started;
}

ifw_vips_image *ifw_vips_open(ifw_vips_loader loader, const void *data, size_t length, int pages) {
    if (started != 0 || (unsigned)loader > IFW_VIPS_HEIF) return NULL;
    VipsImage *out = NULL;
    void *buffer = (void *)data;
    int rc;
    switch (loader) {
    case IFW_VIPS_JPEG:
    case IFW_VIPS_PNG:
        rc = vips.load[loader](buffer, length, &out, "access", ACCESS_SEQUENTIAL, "fail_on", FAIL_ON_ERROR, NULL);
        break;
    case IFW_VIPS_HEIF:
        rc = vips.load[loader](buffer, length, &out, "access", ACCESS_SEQUENTIAL, "fail_on", FAIL_ON_ERROR, "n",
                               pages, "unlimited", 0, NULL);
        break;
    default:
        rc = vips.load[loader](buffer, length, &out, "access", ACCESS_SEQUENTIAL, "fail_on", FAIL_ON_ERROR, "n",
                               pages, NULL);
        break;
    }
    return rc == 0 ? out : NULL;
}

void ifw_vips_unref(ifw_vips_image *image) { vips.object_unref(image); }

int ifw_vips_width(ifw_vips_image *image) { return vips.get_width(image); }

int ifw_vips_page_height(ifw_vips_image *image) { return vips.get_page_height(image); }

int ifw_vips_pages(ifw_vips_image *image) {
    int pages = vips.get_n_pages(image);
    return pages > 0 ? pages : 1;
}

int ifw_vips_orientation(ifw_vips_image *image) { return vips.get_orientation(image); }

int ifw_vips_decode_all(ifw_vips_image *image) {
    double mean = 0;
    return vips.avg(image, &mean, NULL);
}

int ifw_vips_grey_thumbnail(ifw_vips_image *image, int width, int height, unsigned char *out) {
    VipsImage *thumb = NULL, *grey = NULL, *flat = NULL, *srgb = NULL, *cast = NULL;
    int rc = -1;
    if (vips.thumbnail_image(image, &thumb, width, "height", height, "size", SIZE_FORCE, NULL) != 0) goto done;
    if (vips.hasalpha(thumb)) {
        // Transparent pixels count as white, at the alpha's own scale (255, or 65535 for 16 bits).
        int type = vips.get_interpretation(thumb);
        double white = type == INTERPRETATION_RGB16 || type == INTERPRETATION_GREY16 ? 65535.0 : 255.0;
        void *background = vips.array_double_newv(1, white);
        int failed = vips.flatten(thumb, &flat, "background", background, "max_alpha", white, NULL);
        vips.area_unref(background);
        if (failed) goto done;
    } else {
        flat = thumb;
        vips.object_ref(flat);
    }
    // Through sRGB first: it brings 16-bit, CMYK and Lab to 8-bit sRGB, which B_W then averages.
    if (vips.colourspace(flat, &srgb, INTERPRETATION_sRGB, NULL) != 0) goto done;
    if (vips.colourspace(srgb, &grey, INTERPRETATION_B_W, NULL) != 0) goto done;
    if (vips.cast_uchar(grey, &cast, NULL) != 0) goto done;
    int bands = vips.get_bands(cast);
    if (vips.get_width(cast) != width || vips.get_height(cast) != height || bands < 1) {
        vips.error("ifw", "the thumbnail has the wrong size");
        goto done;
    }
    size_t size = 0;
    unsigned char *pixels = vips.write_to_memory(cast, &size);
    if (pixels == NULL) goto done;
    if (size >= (size_t)width * (size_t)height * (size_t)bands) {
        for (int i = 0; i < width * height; i++) out[i] = pixels[i * bands];
        rc = 0;
    }
    vips.free(pixels);
done:
    if (cast) vips.object_unref(cast);
    if (grey) vips.object_unref(grey);
    if (srgb) vips.object_unref(srgb);
    if (flat) vips.object_unref(flat);
    if (thumb) vips.object_unref(thumb);
    return rc;
}

void ifw_vips_error_take(char *buffer, size_t capacity) {
    if (capacity == 0) return;
    buffer[0] = 0;
    if (started != 0) return;
    char *text = vips.error_buffer_copy();
    size_t n = text ? strlen(text) : 0;
    if (n >= capacity) n = capacity - 1;
    if (n > 0) memcpy(buffer, text, n);
    buffer[n] = 0;
    vips.free(text);
}
