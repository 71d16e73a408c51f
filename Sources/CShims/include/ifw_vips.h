#ifndef IFW_VIPS_H
#define IFW_VIPS_H

/*
 * libvips for decode mode (image.verify = decode), opened with dlopen on first use. Linked at
 * start instead, libvips brought 68 more shared libraries (librsvg, OpenEXR, HDF5, X11, ...)
 * into every worker, about 13 MB of resident memory, although decoding is off by default. Its
 * loaders and operations take variadic NULL-terminated options, which Swift cannot call; these
 * functions fix the options the worker uses. Implemented in vips_loader.c.
 */

#include <stddef.h>

#if !defined(__clang__)  /* gcc (scripts/decode-cost.sh) has no nullability qualifiers */
#define _Nonnull
#define _Nullable
#endif

/* An opaque libvips image (VipsImage *), one reference owned by the caller. */
typedef struct ifw_vips_image ifw_vips_image;

/* The loaders the worker uses, by the format its sniffer found. Loading by name (never by
 * vips_image_new_from_buffer's own sniffing) keeps every other loader libvips has out of reach. */
typedef enum {
    IFW_VIPS_JPEG = 0,
    IFW_VIPS_PNG = 1,
    IFW_VIPS_GIF = 2,
    IFW_VIPS_WEBP = 3,
    IFW_VIPS_TIFF = 4,
    IFW_VIPS_HEIF = 5,
} ifw_vips_loader;

/* Once per process (later calls return the first answer): opens libvips, starts it, turns its
 * operation cache off (every body is new), keeps each pipeline on the calling thread, blocks the
 * loaders libvips marks untrusted (ImageMagick, MATLAB, FITS, ...) and silences its warnings.
 * 0 on success; -1 when libvips is missing or does not start. */
int ifw_vips_start(void);

/* Opens `data` lazily with `loader`: only the header is read. Sequential access, fail on error
 * (a damaged or truncated body is an error, not a grey fill); `pages` frames (1: the first).
 * NULL on failure, with the reason for ifw_vips_error_take. */
ifw_vips_image *_Nullable ifw_vips_open(ifw_vips_loader loader, const void *_Nonnull data, size_t length,
                                        int pages);
void ifw_vips_unref(ifw_vips_image *_Nonnull image);

int ifw_vips_width(ifw_vips_image *_Nonnull image);
/* The height of one frame (page-height). */
int ifw_vips_page_height(ifw_vips_image *_Nonnull image);
/* Frames found (n-pages), at least 1. */
int ifw_vips_pages(ifw_vips_image *_Nonnull image);
/* The EXIF orientation, 1 when none. */
int ifw_vips_orientation(ifw_vips_image *_Nonnull image);

/* Decodes every pixel of every frame opened: 0 or -1. */
int ifw_vips_decode_all(ifw_vips_image *_Nonnull image);

/* The first frame decoded, upright (EXIF orientation), reduced to width x height 8-bit grey by
 * a box filter over every pixel, into `out` (width * height bytes): 0 or -1. */
int ifw_vips_grey_thumbnail(ifw_vips_image *_Nonnull image, int width, int height, unsigned char *_Nonnull out);

/* libvips's error text into `buffer` (cut to fit, NUL-terminated), cleared after. */
void ifw_vips_error_take(char *_Nonnull buffer, size_t capacity);

#endif
