#ifndef IFW_CVIPS_SHIM_H
#define IFW_CVIPS_SHIM_H
// libvips's loaders and operations take their options as variadic NULL-terminated lists, which
// Swift cannot call; these inline wrappers fix the options the worker uses.
#include <vips/vips.h>

/// The loaders the worker uses, by the format its sniffer found. Loading by name (never by
/// vips_image_new_from_buffer's own sniffing) keeps every other loader libvips has out of reach.
typedef enum {
    IFW_VIPS_JPEG = 0,
    IFW_VIPS_PNG = 1,
    IFW_VIPS_GIF = 2,
    IFW_VIPS_WEBP = 3,
    IFW_VIPS_TIFF = 4,
    IFW_VIPS_HEIF = 5,
} ifw_vips_loader;

static inline void ifw_vips_quiet(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain; (void)level; (void)message; (void)data;
}

/// Once per process: starts libvips, turns its operation cache off (every body is new, and the
/// cache would keep decoded images alive), keeps each pipeline on the calling thread, and blocks
/// the loaders libvips marks untrusted (ImageMagick, MATLAB, FITS, ...). 0 on success.
static inline int ifw_vips_start(void) {
    if (VIPS_INIT("image-fetch-worker") != 0) return -1;
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(1);
    vips_block_untrusted_set(TRUE);
    // A loader's warnings about a damaged body would go to stderr; the failure itself is returned.
    g_log_set_handler("VIPS", (GLogLevelFlags)(G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO),
                      ifw_vips_quiet, NULL);
    return 0;
}

/// Opens `data` lazily with the loader for `loader`: only the header is read. Sequential access
/// keeps a few strips in memory instead of the whole image; fail_on error makes a damaged or
/// truncated body an error instead of a grey fill. `pages` > 1 asks for that many frames
/// (GIF, WebP, TIFF, HEIF); 1 for the first only. NULL with vips_error_buffer() on failure.
static inline VipsImage *ifw_vips_open(ifw_vips_loader loader, const void *data, size_t length, int pages) {
    VipsImage *out = NULL;
    int rc = -1;
    switch (loader) {
    case IFW_VIPS_JPEG:
        rc = vips_jpegload_buffer((void *)data, length, &out, "access", VIPS_ACCESS_SEQUENTIAL,
                                  "fail_on", VIPS_FAIL_ON_ERROR, NULL);
        break;
    case IFW_VIPS_PNG:
        rc = vips_pngload_buffer((void *)data, length, &out, "access", VIPS_ACCESS_SEQUENTIAL,
                                 "fail_on", VIPS_FAIL_ON_ERROR, NULL);
        break;
    case IFW_VIPS_GIF:
        rc = vips_gifload_buffer((void *)data, length, &out, "access", VIPS_ACCESS_SEQUENTIAL,
                                 "fail_on", VIPS_FAIL_ON_ERROR, "n", pages, NULL);
        break;
    case IFW_VIPS_WEBP:
        rc = vips_webpload_buffer((void *)data, length, &out, "access", VIPS_ACCESS_SEQUENTIAL,
                                  "fail_on", VIPS_FAIL_ON_ERROR, "n", pages, NULL);
        break;
    case IFW_VIPS_TIFF:
        rc = vips_tiffload_buffer((void *)data, length, &out, "access", VIPS_ACCESS_SEQUENTIAL,
                                  "fail_on", VIPS_FAIL_ON_ERROR, "n", pages, NULL);
        break;
    case IFW_VIPS_HEIF:
        rc = vips_heifload_buffer((void *)data, length, &out, "access", VIPS_ACCESS_SEQUENTIAL,
                                  "fail_on", VIPS_FAIL_ON_ERROR, "n", pages, "unlimited", FALSE, NULL);
        break;
    }
    return rc == 0 ? out : NULL;
}

/// The number of frames the loader found (n-pages), 1 when it says none.
static inline int ifw_vips_pages(VipsImage *image) {
    int pages = vips_image_get_n_pages(image);
    return pages > 0 ? pages : 1;
}

/// The height of one frame (page-height), the image's height for a single frame.
static inline int ifw_vips_page_height(VipsImage *image) {
    return vips_image_get_page_height(image);
}

/// Decodes every pixel of `image` (all its frames), to find damage anywhere: 0 or -1.
static inline int ifw_vips_decode_all(VipsImage *image) {
    double mean = 0;
    return vips_avg(image, &mean, NULL);
}

/// The image, decoded, turned upright (EXIF orientation) and reduced to `width` x `height`
/// greyscale (8-bit, one band), written into `out` (width * height bytes). Every pixel is read:
/// the shrink is a box filter over the whole image. 0 or -1.
static inline int ifw_vips_grey_thumbnail(VipsImage *image, int width, int height, unsigned char *out) {
    VipsImage *thumb = NULL, *grey = NULL, *flat = NULL, *srgb = NULL, *cast = NULL;
    int rc = -1;
    if (vips_thumbnail_image(image, &thumb, width, "height", height, "size", VIPS_SIZE_FORCE, NULL) != 0)
        goto done;
    if (vips_image_hasalpha(thumb)) {
        // Transparent pixels count as white, at the alpha's own scale (255, or 65535 for 16 bits).
        double white = thumb->Type == VIPS_INTERPRETATION_RGB16 || thumb->Type == VIPS_INTERPRETATION_GREY16
            ? 65535.0 : 255.0;
        VipsArrayDouble *background = vips_array_double_newv(1, white);
        int failed = vips_flatten(thumb, &flat, "background", background, "max_alpha", white, NULL);
        vips_area_unref(VIPS_AREA(background));
        if (failed) goto done;
    } else {
        flat = thumb; g_object_ref(flat);
    }
    // Through sRGB first: it brings 16-bit, CMYK and Lab to 8-bit sRGB, which B_W then averages.
    if (vips_colourspace(flat, &srgb, VIPS_INTERPRETATION_sRGB, NULL) != 0) goto done;
    if (vips_colourspace(srgb, &grey, VIPS_INTERPRETATION_B_W, NULL) != 0) goto done;
    if (vips_cast_uchar(grey, &cast, NULL) != 0) goto done;
    if (cast->Xsize != width || cast->Ysize != height || cast->Bands < 1) {
        vips_error("ifw", "the thumbnail has the wrong size");
        goto done;
    }
    {
        size_t size = 0;
        unsigned char *pixels = vips_image_write_to_memory(cast, &size);
        if (pixels == NULL) goto done;
        int bands = cast->Bands;
        for (int i = 0; i < width * height; i++) out[i] = pixels[i * bands];
        g_free(pixels);
    }
    rc = 0;
done:
    if (cast) g_object_unref(cast);
    if (grey) g_object_unref(grey);
    if (srgb) g_object_unref(srgb);
    if (flat) g_object_unref(flat);
    if (thumb) g_object_unref(thumb);
    return rc;
}

/// The EXIF orientation libvips read, 1 when none.
static inline int ifw_vips_orientation(VipsImage *image) {
    return vips_image_get_orientation(image);
}

/// Takes libvips's error text into `buffer` (cut to fit), and clears it. libvips keeps one error
/// buffer for all threads: vips_error_buffer_copy reads and clears it under its lock.
static inline void ifw_vips_error_take(char *buffer, size_t capacity) {
    char *text = vips_error_buffer_copy();
    if (capacity > 0) {
        size_t n = text ? strlen(text) : 0;
        if (n >= capacity) n = capacity - 1;
        if (n > 0) memcpy(buffer, text, n);
        buffer[n] = 0;
    }
    g_free(text);
}
#endif
