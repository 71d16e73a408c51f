#include "CShims.h"
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/* These read the files as libcurl and rabbitmq-c will (OpenSSL, PEM), so that a wrong file stops the
 * worker at start-up rather than failing every connection later. The error queue is cleared: these run
 * on the start-up thread, before any connection. */

/* A password callback that gives none: an encrypted key cannot be used unattended. */
static int no_password(char *buffer, int size, int rwflag, void *userdata) {
    (void)buffer; (void)size; (void)rwflag; (void)userdata;
    return 0;
}

int ifw_pem_certificate_count(const char *path) {
    BIO *bio = BIO_new_file(path, "r");
    if (!bio) { ERR_clear_error(); return -1; }
    STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(bio, NULL, no_password, NULL);
    BIO_free(bio);
    if (!infos) { ERR_clear_error(); return -1; }
    int count = 0;
    for (int i = 0; i < sk_X509_INFO_num(infos); i++) {
        if (sk_X509_INFO_value(infos, i)->x509) count++;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    ERR_clear_error();
    return count;
}

static EVP_PKEY *read_key(const char *path) {
    BIO *bio = BIO_new_file(path, "r");
    if (!bio) return NULL;
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL);
    BIO_free(bio);
    return key;
}

static X509 *read_certificate(const char *path) {
    BIO *bio = BIO_new_file(path, "r");
    if (!bio) return NULL;
    X509 *certificate = PEM_read_bio_X509(bio, NULL, no_password, NULL);
    BIO_free(bio);
    return certificate;
}

int ifw_pem_private_key_readable(const char *path) {
    EVP_PKEY *key = read_key(path);
    ERR_clear_error();
    if (!key) return 0;
    EVP_PKEY_free(key);
    return 1;
}

int ifw_pem_key_matches_certificate(const char *certificate_path, const char *key_path) {
    X509 *certificate = read_certificate(certificate_path);
    EVP_PKEY *key = read_key(key_path);
    int matches = certificate && key && X509_check_private_key(certificate, key) == 1;
    if (certificate) X509_free(certificate);
    if (key) EVP_PKEY_free(key);
    ERR_clear_error();
    return matches;
}
