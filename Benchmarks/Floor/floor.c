// The C floor of issue 6: one thread, rabbitmq-c and the libcurl multi interface, doing the job the
// worker does for png32 and jpeg16 — consume, fetch, check the PNG or JPEG header and read its size,
// SHA-256, store under the digest (stat, and write only a new file), publish the result with a
// publisher confirm, ack the job once the result is confirmed.
//
// It is a yardstick, not a product: no retries, no redirects policy, no SSRF guard, no metrics, no
// reconnects; it stops at the first broker error. Built and run by `scripts/bench.sh floor32`,
// `floor1024` and `floor16`, which start it exactly like the worker (`ifw-floor run`, configured
// by the same environment variables), so the driver counts its results and its CPU the same way:
//
//   AMQP_URL QUEUE_JOBS QUEUE_RESULTS WORKER_CONCURRENCY STORAGE_PATH
//
// Build: cc -O2 -o ifw-floor floor.c -lrabbitmq -lcurl -lcrypto
#define _GNU_SOURCE
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <poll.h>
#include <signal.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHANNEL 1
#define ACK_WINDOW 65536 // delivery tags tracked at once; far above the prefetch

static volatile sig_atomic_t stopping = 0;
static void on_signal(int signo) { (void)signo; stopping = 1; }

__attribute__((noreturn)) static void die(const char *what, const char *detail) {
  fprintf(stderr, "ifw-floor: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

static void check_reply(amqp_rpc_reply_t reply, const char *what) {
  if (reply.reply_type == AMQP_RESPONSE_NORMAL) return;
  if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) die(what, amqp_error_string2(reply.library_error));
  die(what, "the broker refused");
}

static const char *env(const char *name, const char *fallback) {
  const char *value = getenv(name);
  if (value && *value) return value;
  if (fallback) return fallback;
  die("missing environment variable", name);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct {
  uint8_t *data;
  size_t count, capacity;
} buffer;

static void buffer_append(buffer *b, const void *bytes, size_t count) {
  if (b->count + count > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 16384;
    while (capacity < b->count + count) capacity *= 2;
    b->data = realloc(b->data, capacity);
    if (!b->data) die("out of memory", NULL);
    b->capacity = capacity;
  }
  memcpy(b->data + b->count, bytes, count);
  b->count += count;
}

// A delivery waiting for a transfer slot, or being fetched.
typedef struct {
  uint64_t tag;
  int redelivered;
  double admitted_ms;
  char id[128];
  char url[1024];
} job;

typedef struct {
  CURL *easy;
  job job;
  buffer body;
  int busy;
} slot;

// Finds `"key":"` and copies the string value (no escapes: the benchmark's jobs have none).
static int json_string(const uint8_t *body, size_t count, const char *key, char *out, size_t capacity) {
  char needle[64];
  int n = snprintf(needle, sizeof needle, "\"%s\":\"", key);
  const uint8_t *p = memmem(body, count, needle, (size_t)n);
  if (!p) return 0;
  p += n;
  const uint8_t *end = memchr(p, '"', count - (size_t)(p - body));
  if (!end || (size_t)(end - p) >= capacity) return 0;
  memcpy(out, p, (size_t)(end - p));
  out[end - p] = 0;
  return 1;
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
  buffer_append(user, data, size * count);
  return size * count;
}

// --- Broker state -------------------------------------------------------------------------------
static amqp_connection_state_t conn;
static amqp_bytes_t results_queue;
static uint64_t next_publish_seq = 1;
static uint64_t seq_to_tag[ACK_WINDOW]; // publish sequence number → job delivery tag
static uint64_t confirmed_seq = 0;      // every publish up to this one is confirmed
static uint8_t tag_done[ACK_WINDOW];    // the job's result is confirmed; ack it
static uint64_t acked_upto = 0;         // every delivery tag up to this one is acked

static job *waiting;
static size_t waiting_head, waiting_count, waiting_capacity;

// Delivery being assembled from its method, header and body frames.
static struct {
  int active;
  uint64_t tag;
  int redelivered;
  size_t expected;
  buffer body;
  int returned; // a basic.return's content: skipped
} incoming;

static void delivery_complete(void) {
  if (incoming.returned) die("a result was returned by the broker (no route)", NULL);
  if (waiting_count == waiting_capacity) die("more deliveries than the prefetch allows", NULL);
  job *j = &waiting[(waiting_head + waiting_count) % waiting_capacity];
  j->tag = incoming.tag;
  j->redelivered = incoming.redelivered;
  j->admitted_ms = now_ms();
  if (!json_string(incoming.body.data, incoming.body.count, "id", j->id, sizeof j->id) ||
      !json_string(incoming.body.data, incoming.body.count, "url", j->url, sizeof j->url))
    die("a job without id or url", NULL);
  waiting_count++;
  incoming.active = 0;
}

static void confirm(uint64_t seq, int multiple) {
  uint64_t from = multiple ? confirmed_seq + 1 : seq;
  for (uint64_t s = from; s <= seq; s++) {
    uint64_t tag = seq_to_tag[s % ACK_WINDOW];
    if (tag > acked_upto) tag_done[tag % ACK_WINDOW] = 1;
  }
  if (multiple || seq == confirmed_seq + 1) confirmed_seq = seq;
}

// Reads every frame that is already there, without blocking.
static void read_frames(void) {
  struct timeval zero = {0, 0};
  for (;;) {
    amqp_frame_t frame;
    int status = amqp_simple_wait_frame_noblock(conn, &frame, &zero);
    if (status == AMQP_STATUS_TIMEOUT) break;
    if (status != AMQP_STATUS_OK) die("reading from the broker", amqp_error_string2(status));
    if (frame.channel != CHANNEL) continue;
    switch (frame.frame_type) {
    case AMQP_FRAME_METHOD:
      switch (frame.payload.method.id) {
      case AMQP_BASIC_DELIVER_METHOD: {
        amqp_basic_deliver_t *d = frame.payload.method.decoded;
        incoming.active = 1;
        incoming.returned = 0;
        incoming.tag = d->delivery_tag;
        incoming.redelivered = d->redelivered;
        incoming.body.count = 0;
        break;
      }
      case AMQP_BASIC_RETURN_METHOD:
        incoming.active = 1;
        incoming.returned = 1;
        incoming.body.count = 0;
        break;
      case AMQP_BASIC_ACK_METHOD: {
        amqp_basic_ack_t *a = frame.payload.method.decoded;
        confirm(a->delivery_tag, a->multiple);
        break;
      }
      case AMQP_BASIC_NACK_METHOD: die("the broker nacked a result", NULL);
      case AMQP_CHANNEL_CLOSE_METHOD: die("the broker closed the channel", NULL);
      default: break;
      }
      break;
    case AMQP_FRAME_HEADER:
      incoming.expected = (size_t)frame.payload.properties.body_size;
      if (incoming.active && incoming.expected == 0) delivery_complete();
      break;
    case AMQP_FRAME_BODY:
      buffer_append(&incoming.body, frame.payload.body_fragment.bytes, frame.payload.body_fragment.len);
      if (incoming.active && incoming.body.count >= incoming.expected) delivery_complete();
      break;
    default: break;
    }
  }
  amqp_maybe_release_buffers(conn);
}

// Acks the longest run of confirmed jobs at the front, in one `multiple` ack.
static void ack_confirmed(void) {
  uint64_t tag = acked_upto;
  while (tag_done[(tag + 1) % ACK_WINDOW]) {
    tag++;
    tag_done[tag % ACK_WINDOW] = 0;
  }
  if (tag == acked_upto) return;
  if (amqp_basic_ack(conn, CHANNEL, tag, 1) != AMQP_STATUS_OK) die("acking", NULL);
  acked_upto = tag;
}

// --- The job ------------------------------------------------------------------------------------
static const char *storage_root;
static char hostname_buffer[256];

static void hex(const uint8_t *digest, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = digits[digest[i] >> 4];
    out[2 * i + 1] = digits[digest[i] & 15];
  }
  out[64] = 0;
}

// PNG: the size from IHDR. JPEG: the segments from SOI to the first frame header (SOFn), as the
// worker reads them. 0 when the body is neither.
static int image_size(const uint8_t *b, size_t n, const char **format, const char **extension, uint32_t *width,
                      uint32_t *height) {
  if (n >= 24 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 && memcmp(b + 12, "IHDR", 4) == 0) {
    *format = "png";
    *extension = "png";
    *width = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    *height = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    return 1;
  }
  if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return 0;
  size_t i = 2;
  while (i + 4 <= n) {
    if (b[i] != 0xFF) return 0;
    uint8_t marker = b[i + 1];
    if (marker == 0xFF) { // fill byte
      i++;
      continue;
    }
    size_t length = (size_t)b[i + 2] << 8 | b[i + 3];
    if (length < 2) return 0;
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      if (i + 9 > n) return 0;
      *format = "jpeg";
      *extension = "jpg";
      *height = (uint32_t)b[i + 5] << 8 | b[i + 6];
      *width = (uint32_t)b[i + 7] << 8 | b[i + 8];
      return 1;
    }
    i += 2 + length;
  }
  return 0;
}

// Writes the body under its digest unless a file is already there (temporary file + rename).
static int store(const buffer *body, const char *path, const char *folder) {
  struct stat info;
  if (stat(path, &info) == 0 && S_ISREG(info.st_mode)) return 1;
  mkdir(folder, 0755);
  char temporary[4096];
  snprintf(temporary, sizeof temporary, "%s.tmp-%d", path, getpid());
  int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < body->count) {
    ssize_t n = write(fd, body->data + done, body->count - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) { close(fd); unlink(temporary); return 0; }
    done += (size_t)n;
  }
  close(fd);
  return rename(temporary, path) == 0;
}

static void finish(slot *s, CURLcode code) {
  long http_status = 0;
  char *content_type = NULL;
  double total = 0;
  curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &http_status);
  curl_easy_getinfo(s->easy, CURLINFO_CONTENT_TYPE, &content_type);
  curl_easy_getinfo(s->easy, CURLINFO_TOTAL_TIME, &total);

  char json[4096];
  int n;
  char when[32];
  time_t t = time(NULL);
  struct tm tm;
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
  const uint8_t *b = s->body.data;
  const char *format = NULL, *extension = NULL;
  uint32_t width = 0, height = 0;
  if (code == CURLE_OK && http_status == 200 && image_size(b, s->body.count, &format, &extension, &width, &height)) {
    uint8_t digest[32];
    char sha[65], folder[2100], path[2200];
    SHA256(b, s->body.count, digest);
    hex(digest, sha);
    snprintf(folder, sizeof folder, "%s/%.2s", storage_root, sha);
    snprintf(path, sizeof path, "%s/%s.%s", folder, sha, extension);
    if (!store(&s->body, path, folder)) die("cannot store", path);
    n = snprintf(json, sizeof json,
                 "{\"id\":\"%s\",\"url\":\"%s\",\"status\":\"ok\",\"attempt\":1,\"redelivered\":%s,"
                 "\"http_status\":%ld,\"content_type\":\"%s\",\"format\":\"%s\",\"width\":%u,\"height\":%u,"
                 "\"bytes\":%zu,\"sha256\":\"%s\",\"location\":\"file://%s\",\"final_url\":\"%s\",\"redirects\":0,"
                 "\"duration_ms\":%.3f,\"timings\":{\"total_ms\":%.3f},\"worker\":\"%s\",\"finished_at\":\"%s\"}",
                 s->job.id, s->job.url, s->job.redelivered ? "true" : "false", http_status,
                 content_type ? content_type : "", format, width, height, s->body.count, sha, path, s->job.url,
                 now_ms() - s->job.admitted_ms, total * 1e3, hostname_buffer, when);
  } else {
    n = snprintf(json, sizeof json,
                 "{\"id\":\"%s\",\"url\":\"%s\",\"status\":\"failed\",\"attempt\":1,\"redelivered\":%s,"
                 "\"error\":{\"code\":\"fetch_failed\",\"message\":\"curl %d, HTTP %ld\",\"retryable\":false},"
                 "\"duration_ms\":%.3f,\"worker\":\"%s\",\"finished_at\":\"%s\"}",
                 s->job.id, s->job.url, s->job.redelivered ? "true" : "false", (int)code, http_status,
                 now_ms() - s->job.admitted_ms, hostname_buffer, when);
  }
  if (n < 0 || (size_t)n >= sizeof json) die("result too long", NULL);

  amqp_basic_properties_t properties;
  properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG;
  properties.content_type = amqp_cstring_bytes("application/json");
  properties.delivery_mode = 2;
  properties.correlation_id = amqp_cstring_bytes(s->job.id);
  amqp_bytes_t message = {(size_t)n, json};
  if (amqp_basic_publish(conn, CHANNEL, amqp_empty_bytes, results_queue, 1, 0, &properties, message) != AMQP_STATUS_OK)
    die("publishing a result", NULL);
  seq_to_tag[next_publish_seq % ACK_WINDOW] = s->job.tag;
  next_publish_seq++;
  s->busy = 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "run") != 0) die("usage: ifw-floor run (configured by the environment)", NULL);
  /* As the worker does (MallocRetention): keep freed buffers for the next job instead of handing
     them back to the kernel and faulting them in again (1.7 page faults per job without it). */
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, 32 << 20) != 1) die("mallopt refused", NULL);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  signal(SIGPIPE, SIG_IGN);
  gethostname(hostname_buffer, sizeof hostname_buffer - 1);

  char *url = strdup(env("AMQP_URL", NULL));
  char *comma = strchr(url, ',');
  if (comma) *comma = 0;
  struct amqp_connection_info info;
  if (amqp_parse_url(url, &info) != AMQP_STATUS_OK) die("AMQP_URL is not an amqp:// URL", NULL);
  const char *jobs_queue = env("QUEUE_JOBS", "image-fetch.jobs");
  results_queue = amqp_cstring_bytes((char *)env("QUEUE_RESULTS", "image-fetch.results"));
  int concurrency = atoi(env("WORKER_CONCURRENCY", "32"));
  if (concurrency < 1 || concurrency > 4096) die("WORKER_CONCURRENCY must be 1...4096", NULL);
  storage_root = env("STORAGE_PATH", NULL);
  if (strlen(storage_root) > 2048) die("STORAGE_PATH is too long", NULL);
  mkdir(storage_root, 0755);

  conn = amqp_new_connection();
  amqp_socket_t *socket = amqp_tcp_socket_new(conn);
  if (!socket || amqp_socket_open(socket, info.host, info.port) != AMQP_STATUS_OK) die("cannot connect to the broker", NULL);
  check_reply(amqp_login(conn, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password), "login");
  amqp_channel_open(conn, CHANNEL);
  check_reply(amqp_get_rpc_reply(conn), "channel.open");
  amqp_confirm_select(conn, CHANNEL);
  check_reply(amqp_get_rpc_reply(conn), "confirm.select");
  uint16_t prefetch = (uint16_t)(concurrency * 2 > 65535 ? 65535 : concurrency * 2);
  amqp_basic_qos(conn, CHANNEL, 0, prefetch, 0);
  check_reply(amqp_get_rpc_reply(conn), "basic.qos");
  amqp_basic_consume(conn, CHANNEL, amqp_cstring_bytes((char *)jobs_queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  check_reply(amqp_get_rpc_reply(conn), "basic.consume");
  int fd = amqp_get_sockfd(conn);

  waiting_capacity = prefetch;
  waiting = calloc(waiting_capacity, sizeof *waiting);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init", NULL);
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)concurrency);
  slot *slots = calloc((size_t)concurrency, sizeof *slots);
  /* The ceiling of the worker's receive buffers (ReceiveBufferSizing): 4 MiB shared by all
     transfers, 4 KiB to 256 KiB each; at concurrency 1,024 libcurl's default would hold 16 MiB
     where the worker holds 4. The worker also sizes them down to the bodies it sees (16 KiB for
     12 KB images); a 12 KB body takes one read either way, so rate and CPU compare alike. */
  long receive_buffer = (4L << 20) / concurrency;
  if (receive_buffer < 4096) receive_buffer = 4096;
  if (receive_buffer > 256 << 10) receive_buffer = 256 << 10;
  for (int i = 0; i < concurrency; i++) {
    CURL *easy = curl_easy_init();
    if (!easy) die("curl_easy_init", NULL);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &slots[i].body);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, &slots[i]);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(easy, CURLOPT_PROXY, "");
    if (curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, receive_buffer) != CURLE_OK) die("CURLOPT_BUFFERSIZE", NULL);
    slots[i].easy = easy;
  }

  while (!stopping) {
    // Start a transfer for every waiting delivery that has a free slot.
    for (int i = 0; i < concurrency && waiting_count > 0; i++) {
      if (slots[i].busy) continue;
      slots[i].job = waiting[waiting_head];
      waiting_head = (waiting_head + 1) % waiting_capacity;
      waiting_count--;
      slots[i].body.count = 0;
      slots[i].busy = 1;
      curl_easy_setopt(slots[i].easy, CURLOPT_URL, slots[i].job.url);
      if (curl_multi_add_handle(multi, slots[i].easy) != CURLM_OK) die("curl_multi_add_handle", NULL);
    }
    struct curl_waitfd broker = {.fd = fd, .events = CURL_WAIT_POLLIN, .revents = 0};
    int ready = 0;
    if (curl_multi_poll(multi, &broker, 1, 1000, &ready) != CURLM_OK) die("curl_multi_poll", NULL);
    int running = 0;
    if (curl_multi_perform(multi, &running) != CURLM_OK) die("curl_multi_perform", NULL);
    CURLMsg *message;
    int left;
    while ((message = curl_multi_info_read(multi, &left))) {
      if (message->msg != CURLMSG_DONE) continue;
      slot *s;
      curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&s);
      CURLcode code = message->data.result;
      curl_multi_remove_handle(multi, message->easy_handle);
      finish(s, code);
    }
    read_frames();
    ack_confirmed();
  }
  amqp_channel_close(conn, CHANNEL, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn);
  return 0;
}
