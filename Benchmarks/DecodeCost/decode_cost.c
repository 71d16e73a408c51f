// The CPU cost of one decode in image.verify=decode mode, for scripts/decode-cost.sh: the same
// libvips calls, with the same options, as ImageDecoder.decode (Sources/CVips/shim.h), repeated.
//
//   decode_cost LOADER ITERATIONS FILE
//
// LOADER is ifw_vips_loader's number (0 JPEG, 1 PNG, 2 GIF, 3 WebP, 4 TIFF, 5 HEIF). The file is
// read once; each iteration opens it from memory, reads the header and makes the 9 x 8 grey
// thumbnail (which decodes every pixel of the first frame). Exits 1 if a decode fails.
#include "ifw_vips.h"
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: decode_cost LOADER ITERATIONS FILE\n"); return 64; }
    if (ifw_vips_start() != 0) { fprintf(stderr, "libvips did not start\n"); return 1; }
    gchar *data = NULL;
    gsize length = 0;
    if (!g_file_get_contents(argv[3], &data, &length, NULL)) { fprintf(stderr, "cannot read %s\n", argv[3]); return 1; }
    int loader = atoi(argv[1]), iterations = atoi(argv[2]);
    unsigned char grey[72];
    for (int i = 0; i < iterations; i++) {
        ifw_vips_image *image = ifw_vips_open((ifw_vips_loader)loader, data, length, 1);
        if (image == NULL || ifw_vips_grey_thumbnail(image, 9, 8, grey) != 0) {
            char reason[512];
            ifw_vips_error_take(reason, sizeof reason);
            fprintf(stderr, "%s: %s\n", argv[3], reason);
            return 1;
        }
        ifw_vips_unref(image);
    }
    g_free(data);
    return 0;
}
