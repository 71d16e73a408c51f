#ifndef IFW_CIDN2_SHIM_H
#define IFW_CIDN2_SHIM_H
#include <idn2.h>
#endif
