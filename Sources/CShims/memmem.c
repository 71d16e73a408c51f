/*
 * memmem, which Swift's Glibc module does not import (a GNU extension, behind _GNU_SOURCE).
 * glibc's is the two-way search: linear in the haystack whatever the needle, which the
 * robots.txt matcher relies on against hostile patterns.
 */
#define _GNU_SOURCE
#include <string.h>
#include "CShims.h"

const void *ifw_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length) {
    return memmem(haystack, haystack_length, needle, needle_length);
}
