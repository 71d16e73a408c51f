#include "CShims.h"

#include <idn2.h>
#include <stdlib.h>

/* Lookup flags as libcurl uses them: NFC, UTS #46 non-transitional mapping, and the A-label round trip
 * (an xn-- label must decode to a valid U-label that encodes back to itself). */
static const int ifw_idna_flags = IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL | IDN2_ALABEL_ROUNDTRIP;

int ifw_idna_to_ascii(const char *input, char **output) {
    *output = NULL;
    return idn2_to_ascii_8z(input, output, ifw_idna_flags);
}

int ifw_idna_to_unicode(const char *input, char **output) {
    *output = NULL;
    return idn2_to_unicode_8z8z(input, output, 0);
}

void ifw_idna_free(void *pointer) {
    idn2_free(pointer);
}
