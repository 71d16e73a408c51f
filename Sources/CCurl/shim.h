#ifndef IFW_CCURL_SHIM_H
#define IFW_CCURL_SHIM_H
#include <curl/curl.h>
#endif
