/* safetensors.c - see safetensors.h for the format and the checks. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* CRC-32 (IEEE 802.3, zlib's crc32 and Python's zlib.crc32) of n bytes,
 * half a byte at a time from a table of 16: the checksum of each tensor's
 * data kept in the metadata (see safetensors.h). */
static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    static const uint32_t nibble[16] = {
        0x00000000, 0x1DB71064, 0x3B6E20C8, 0x26D930AC, 0x76DC4190, 0x6B6B51F4,
        0x4DB26158, 0x5005713C, 0xEDB88320, 0xF00F9344, 0xD6D6A3E8, 0xCB61B38C,
        0x9B64C2B0, 0x86D3D2D4, 0xA00AE278, 0xBDBDF21C};
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc = nibble[(crc ^ p[i]) & 15] ^ (crc >> 4);
        crc = nibble[(crc ^ (p[i] >> 4)) & 15] ^ (crc >> 4);
    }
    return crc ^ 0xFFFFFFFFu;
}

uint32_t safetensors_crc32(const Tensor *t)
{
    return crc32_of(t->data, (size_t)tensor_numel(t) * dtype_size(t->dtype));
}

static int is_checksum_key(const char *key)
{
    return strncmp(key, SAFETENSORS_CHECKSUM, sizeof SAFETENSORS_CHECKSUM - 1) == 0;
}

/* Checks every checksum in file's metadata against its tensor's data,
 * then drops them from the metadata (they describe this file's bytes, not
 * what a program writes next). A file without them passes unchecked. */
static int check_checksums(const char *path, TensorFile *file, Error *err)
{
    int kept = 0;
    for (int i = 0; i < file->n_meta; i++) {
        const char *key = file->meta_keys[i], *value = file->meta_values[i];
        if (!is_checksum_key(key)) {
            file->meta_keys[kept] = file->meta_keys[i];
            file->meta_values[kept++] = file->meta_values[i];
            continue;
        }
        const char *name = key + sizeof SAFETENSORS_CHECKSUM - 1;
        const Tensor *t = tensorfile_find(file, name);
        char *end;
        unsigned long want = strtoul(value, &end, 16);
        int rc = 0;
        if (!t)
            rc = error_set(err, "%s: metadata '%s' is the checksum of a tensor '%s' the file "
                           "does not have", path, key, name);
        else if (strlen(value) != 8 || *end != '\0')
            rc = error_set(err, "%s: metadata '%s' is '%.20s', not 8 hex digits", path, key,
                           value);
        else if (safetensors_crc32(t) != (uint32_t)want)
            rc = error_set(err, "%s: tensor '%s' does not match its checksum (crc32 %08x, the "
                           "file says %s): the file is damaged", path, name,
                           (unsigned)safetensors_crc32(t), value);
        free(file->meta_keys[i]), free(file->meta_values[i]);
        if (rc != 0) {           /* the rest are freed as usual */
            for (int j = i + 1; j < file->n_meta; j++) {
                file->meta_keys[kept] = file->meta_keys[j];
                file->meta_values[kept++] = file->meta_values[j];
            }
            file->n_meta = kept;
            return -1;
        }
    }
    file->n_meta = kept;
    return 0;
}

static char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

void tensorfile_free(TensorFile *file)
{
    for (int i = 0; i < file->n_tensors; i++) {
        free(file->tensors[i].name);
        tensor_free(&file->tensors[i].tensor);
    }
    for (int i = 0; i < file->n_meta; i++) {
        free(file->meta_keys[i]);
        free(file->meta_values[i]);
    }
    free(file->tensors);
    free(file->meta_keys);
    free(file->meta_values);
    free(file->path);
    memset(file, 0, sizeof *file);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

/* Reads the whole file into memory. */
static int read_all(const char *path, unsigned char **out, size_t *size, Error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "cannot open %s: %s", path, strerror(errno));
    unsigned char *buf = NULL;
    size_t used = 0, cap = 0;
    for (;;) {
        if (used == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *bigger = realloc(buf, cap);
            if (!bigger) {
                free(buf);
                fclose(f);
                return error_set(err, "%s: out of memory reading the file", path);
            }
            buf = bigger;
        }
        size_t got = fread(buf + used, 1, cap - used, f);
        used += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return error_set(err, "cannot read %s: %s", path, strerror(errno));
    }
    /* A NUL after the last byte (the loop always leaves room: it grows the
     * buffer before it reads): cJSON 1.7.15-1.7.17 read one byte past the
     * length they are given when a header ends inside an object (upstream
     * issue 800), which this byte keeps inside the buffer. */
    buf[used] = '\0';
    *out = buf;
    *size = used;
    return 0;
}

/* A non-negative integer that a double holds exactly. */
static int json_to_u64(const cJSON *item, uint64_t *out)
{
    if (!cJSON_IsNumber(item)) return -1;
    double v = item->valuedouble;
    if (v < 0 || v > 9007199254740992.0 || v != (double)(uint64_t)v) return -1;
    *out = (uint64_t)v;
    return 0;
}

typedef struct {
    const char *name;
    uint64_t begin, end;
} Range;

static int compare_ranges(const void *a, const void *b)
{
    const Range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks one tensor entry of the header and copies its bytes into `nt`. */
static int read_entry(const char *path, const cJSON *entry, const unsigned char *data,
                      uint64_t data_size, NamedTensor *nt, Range *range, Error *err)
{
    const char *name = entry->string;
    if (!cJSON_IsObject(entry))
        return error_set(err, "%s: tensor '%s': header entry is not an object", path, name);

    const cJSON *jdtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *jshape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *joffs = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsString(jdtype))
        return error_set(err, "%s: tensor '%s': missing string \"dtype\"", path, name);
    if (!cJSON_IsArray(jshape))
        return error_set(err, "%s: tensor '%s': missing array \"shape\"", path, name);
    if (!cJSON_IsArray(joffs) || cJSON_GetArraySize(joffs) != 2)
        return error_set(err, "%s: tensor '%s': \"data_offsets\" must be [begin, end]",
                         path, name);

    DType dtype;
    if (dtype_from_name(jdtype->valuestring, &dtype) != 0)
        return error_set(err, "%s: tensor '%s': unsupported dtype '%s' (this project reads "
                         "F32, F64, I64, I32, U8, BOOL)", path, name, jdtype->valuestring);

    int ndim = cJSON_GetArraySize(jshape);
    if (ndim > TENSOR_MAX_DIMS)
        return error_set(err, "%s: tensor '%s': rank %d is above the limit of %d", path, name,
                         ndim, TENSOR_MAX_DIMS);
    int64_t shape[TENSOR_MAX_DIMS], numel, bytes;
    for (int i = 0; i < ndim; i++) {
        uint64_t dim;
        if (json_to_u64(cJSON_GetArrayItem(jshape, i), &dim) != 0)
            return error_set(err, "%s: tensor '%s': shape entry %d is not a non-negative "
                             "integer", path, name, i);
        shape[i] = (int64_t)dim;               /* at most 2^53: json_to_u64 */
    }
    if (size_product(&numel, ndim, shape) != 0 ||
        size_mul(&bytes, numel, (int64_t)dtype_size(dtype)) != 0)
        return error_set(err, "%s: tensor '%s': shape is too large", path, name);

    uint64_t begin, end;
    if (json_to_u64(cJSON_GetArrayItem(joffs, 0), &begin) != 0 ||
        json_to_u64(cJSON_GetArrayItem(joffs, 1), &end) != 0 || end < begin)
        return error_set(err, "%s: tensor '%s': data_offsets must be integers with "
                         "0 <= begin <= end", path, name);
    if (end > data_size)
        return error_set(err, "%s: tensor '%s': data_offsets [%llu, %llu] lie outside the "
                         "%llu-byte data section (file truncated?)", path, name,
                         (unsigned long long)begin, (unsigned long long)end,
                         (unsigned long long)data_size);
    uint64_t expect = (uint64_t)bytes;
    if (end - begin != expect)
        return error_set(err, "%s: tensor '%s': shape and dtype %s need %llu bytes but "
                         "data_offsets give %llu", path, name, dtype_name(dtype),
                         (unsigned long long)expect, (unsigned long long)(end - begin));

    nt->name = copy_string(name);
    if (!nt->name || tensor_alloc(&nt->tensor, dtype, ndim, shape, err) != 0)
        return error_set(err, "%s: out of memory for tensor '%s'", path, name);
    memcpy(nt->tensor.data, data + begin, (size_t)expect);
    *range = (Range){nt->name, begin, end};
    return 0;
}

/* The ranges must tile [0, data_size): sorted by begin, each starts where the
 * previous one ended. */
static int check_ranges(const char *path, Range *ranges, int n, uint64_t data_size,
                        Error *err)
{
    qsort(ranges, (size_t)n, sizeof *ranges, compare_ranges);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (ranges[i].begin < at)
            return error_set(err, "%s: tensor '%s' overlaps the tensor before it in the "
                             "data section", path, ranges[i].name);
        if (ranges[i].begin > at)
            return error_set(err, "%s: gap of %llu unused bytes before tensor '%s'", path,
                             (unsigned long long)(ranges[i].begin - at), ranges[i].name);
        at = ranges[i].end;
    }
    if (at != data_size)
        return error_set(err, "%s: %llu bytes after the last tensor belong to no tensor",
                         path, (unsigned long long)(data_size - at));
    return 0;
}

static int read_metadata(const char *path, const cJSON *meta, TensorFile *file, Error *err)
{
    if (!cJSON_IsObject(meta))
        return error_set(err, "%s: \"__metadata__\" is not an object", path);
    const cJSON *item;
    cJSON_ArrayForEach(item, meta) {
        if (!cJSON_IsString(item))
            return error_set(err, "%s: metadata '%s' is not a string", path, item->string);
        if (tensorfile_set_meta(file, item->string, item->valuestring, err) != 0)
            return -1;
    }
    return 0;
}

static int parse(const char *path, const unsigned char *buf, size_t size, TensorFile *file,
                 Error *err)
{
    if (size < 8)
        return error_set(err, "%s: file is %zu bytes, too short for the 8-byte header "
                         "length (truncated?)", path, size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | buf[i];
    if (header_len > SAFETENSORS_MAX_HEADER)
        return error_set(err, "%s: header length %llu is above the 100 MB limit (not a "
                         "safetensors file?)", path, (unsigned long long)header_len);
    if (header_len > size - 8)
        return error_set(err, "%s: header length %llu runs past the end of the %zu-byte "
                         "file (truncated?)", path, (unsigned long long)header_len, size);

    const char *json = (const char *)buf + 8;
    const char *json_end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)header_len, &json_end, 0);
    if (!root)
        return error_set(err, "%s: header is not valid JSON (near byte %ld of the header)",
                         path, cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - json) : 0L);
    for (const char *p = json_end; p < json + header_len; p++) {
        if (*p != ' ') {   /* the format allows only space padding after the JSON */
            cJSON_Delete(root);
            return error_set(err, "%s: unexpected bytes after the JSON header", path);
        }
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return error_set(err, "%s: header is not a JSON object", path);
    }

    const unsigned char *data = buf + 8 + header_len;
    uint64_t data_size = size - 8 - header_len;
    int n = 0;
    for (const cJSON *e = root->child; e; e = e->next) n++;
    Range *ranges = calloc((size_t)n + 1, sizeof *ranges);
    file->tensors = calloc((size_t)n + 1, sizeof *file->tensors);
    if (!ranges || !file->tensors) {
        free(ranges);
        cJSON_Delete(root);
        return error_set(err, "%s: out of memory", path);
    }

    int rc = 0, n_ranges = 0;
    for (const cJSON *e = root->child; e && rc == 0; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            rc = read_metadata(path, e, file, err);
            continue;
        }
        if (tensorfile_find(file, e->string)) {
            rc = error_set(err, "%s: tensor '%s' appears twice in the header", path,
                           e->string);
            break;
        }
        NamedTensor *nt = &file->tensors[file->n_tensors];
        rc = read_entry(path, e, data, data_size, nt, &ranges[n_ranges], err);
        if (nt->name) file->n_tensors++;   /* so that free() finds a partial entry */
        if (rc == 0) n_ranges++;
    }
    if (rc == 0) rc = check_ranges(path, ranges, n_ranges, data_size, err);
    if (rc == 0) rc = check_checksums(path, file, err);
    free(ranges);
    cJSON_Delete(root);
    return rc;
}

int safetensors_read(const char *path, TensorFile *file, Error *err)
{
    memset(file, 0, sizeof *file);
    unsigned char *buf = NULL;
    size_t size = 0;
    if (read_all(path, &buf, &size, err) != 0) return -1;
    file->path = copy_string(path);
    int rc = file->path ? parse(path, buf, size, file, err)
                        : error_set(err, "%s: out of memory", path);
    free(buf);
    if (rc != 0) tensorfile_free(file);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

/* The JSON header, padded with spaces to a multiple of 8 bytes so that the
 * data section starts aligned. */
static char *build_header(const TensorFile *file, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    int ok = 1;
    /* The metadata, then the checksum of each tensor's data (made here, from
     * the data written; any older ones in file->meta are left out). */
    if (file->n_meta > 0 || file->n_tensors > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        ok = meta != NULL;
        for (int i = 0; ok && i < file->n_meta; i++)
            if (!is_checksum_key(file->meta_keys[i]))
                ok = cJSON_AddStringToObject(meta, file->meta_keys[i],
                                             file->meta_values[i]) != NULL;
        for (int i = 0; ok && i < file->n_tensors; i++) {
            char key[512], value[16];
            snprintf(value, sizeof value, "%08x",
                     (unsigned)safetensors_crc32(&file->tensors[i].tensor));
            ok = snprintf(key, sizeof key, "%s%s", SAFETENSORS_CHECKSUM,
                          file->tensors[i].name) < (int)sizeof key &&
                 cJSON_AddStringToObject(meta, key, value) != NULL;
        }
    }
    uint64_t offset = 0;
    for (int i = 0; ok && i < file->n_tensors; i++) {
        const Tensor *t = &file->tensors[i].tensor;
        uint64_t bytes = (uint64_t)tensor_numel(t) * dtype_size(t->dtype);
        cJSON *entry = cJSON_AddObjectToObject(root, file->tensors[i].name);
        cJSON *shape = cJSON_CreateArray();
        cJSON *offs = cJSON_CreateArray();
        ok = entry && shape && offs &&
             cJSON_AddStringToObject(entry, "dtype", dtype_name(t->dtype));
        for (int d = 0; ok && d < t->ndim; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + bytes)));
        if (ok) {
            cJSON_AddItemToObject(entry, "shape", shape);
            cJSON_AddItemToObject(entry, "data_offsets", offs);
        } else {
            cJSON_Delete(shape);
            cJSON_Delete(offs);
        }
        offset += bytes;
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) return NULL;
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    char *out = malloc(padded + 1);
    if (out) {
        memcpy(out, json, n);
        memset(out + n, ' ', padded - n);
        out[padded] = '\0';
        *len = padded;
    }
    free(json);
    return out;
}

/* Where a write to path must land: path itself, or, when path is a
 * symbolic link, the file it names (the link stays a link). A path that
 * exists and is not a regular file (a FIFO, a device, a folder) is refused:
 * renaming over it would replace it. *target is malloc'd. */
static int write_target(const char *path, char **target, Error *err)
{
    struct stat st;
    *target = NULL;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        *target = realpath(path, NULL);
        if (!*target && errno != ENOENT)
            return error_set(err, "cannot write %s: %s", path, strerror(errno));
        if (!*target)   /* a dangling link: write the file it names */
            return error_set(err, "cannot write %s: it is a symbolic link to a missing file",
                             path);
    } else {
        *target = strdup(path);
        if (!*target) return error_set(err, "%s: out of memory", path);
    }
    if (stat(*target, &st) == 0 && !S_ISREG(st.st_mode)) {
        free(*target);
        *target = NULL;
        return error_set(err, "cannot write %s: it exists and is not a regular file (a FIFO, "
                         "device or folder is not replaced)", path);
    }
    return 0;
}

/* Whether fd and path name the same file (path not replaced or removed
 * since fd was opened). */
static int same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Removes the temporary files an interrupted write to target left behind:
 * target.tmp.XXXXXX, six characters as mkstemp makes them. A write holds a
 * lock (flock) on its temporary file until the rename, and the kernel drops
 * the lock when the writer dies: a file that can be locked has no writer
 * left. The temporary file of a write still under way, by this process or
 * another, cannot be locked and is kept. */
void file_remove_stale_temps(const char *target)
{
    char dir[4096];
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == target) {
        strcpy(dir, "/");
    } else {
        size_t n = (size_t)(slash - target);
        if (n >= sizeof dir) return;
        memcpy(dir, target, n);
        dir[n] = '\0';
    }
    DIR *d = opendir(dir);
    if (!d) return;
    size_t n = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, n) != 0 || strncmp(e->d_name + n, ".tmp.", 5) != 0 ||
            strlen(e->d_name + n + 5) != 6)
            continue;
        char stale[4096 + 256];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        int fd = open(stale, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            same_file(fd, stale))
            unlink(stale);
        close(fd);   /* drops the lock */
    }
    closedir(d);
}

/* Creates target.tmp.XXXXXX (its name left in tmp) and locks it, so that
 * no other write's file_remove_stale_temps takes it for a stale one. Another
 * write may remove it in the moment between mkstemp and flock; then the
 * name no longer leads to this file, and a new one is made. Returns the
 * descriptor, or -1 with errno set. */
static int create_temp(const char *target, char *tmp, size_t tmp_len)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, tmp_len, "%s.tmp.XXXXXX", target);
        int fd = mkstemp(tmp);
        if (fd < 0) return -1;
        /* Where flock is not supported (some network file systems) the write
         * goes on unlocked: file_remove_stale_temps cannot lock there either, and
         * so removes nothing. */
        if (flock(fd, LOCK_EX) != 0 && errno != ENOLCK && errno != EOPNOTSUPP && errno != ENOSYS) {
            int saved = errno;
            close(fd);
            unlink(tmp);
            errno = saved;
            return -1;
        }
        if (same_file(fd, tmp)) return fd;
        close(fd);
    }
    errno = EAGAIN;
    return -1;
}

/* The permissions a new file gets: 0666 less the process's umask, as
 * fopen would give (mkstemp makes its file 0600). */
static mode_t file_mode(void)
{
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

int file_write_atomic(const char *path, const FilePart *parts, int n_parts, Error *err)
{
    char *target;
    if (write_target(path, &target, err) != 0) return -1;
    size_t tmp_len = strlen(target) + 16;
    char *tmp = malloc(tmp_len);
    if (!tmp) {
        free(target);
        return error_set(err, "cannot write %s: out of memory", path);
    }

    /* Write beside the destination, then rename: readers never see half a
     * file, and a crash leaves the old file whole. The data reaches the disk
     * (fsync) before the rename makes it the file. */
    file_remove_stale_temps(target);
    int fd = create_temp(target, tmp, tmp_len);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int saved = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp), free(target);
        return error_set(err, "cannot create %s: %s", path, strerror(saved));
    }

    /* The first failure's errno is the reason (a full disk often shows only
     * when the buffer is flushed, at fflush or fsync). */
    int saved = 0;
    for (int i = 0; !saved && i < n_parts; i++)
        if (fwrite(parts[i].data, 1, parts[i].size, f) != parts[i].size) saved = errno ? errno : EIO;
    if (!saved && (fflush(f) != 0 || fchmod(fd, file_mode()) != 0 || fsync(fd) != 0))
        saved = errno;
    /* Renamed while still open: the lock lasts until the file has its name. */
    if (!saved && rename(tmp, target) != 0) saved = errno;
    if (saved) unlink(tmp);
    if (fclose(f) != 0 && !saved) saved = errno;
    free(tmp), free(target);
    return saved ? error_set(err, "cannot write %s: %s", path, strerror(saved)) : 0;
}

int text_out_open(TextOut *out, Error *err)
{
    out->text = NULL;
    out->len = 0;
    out->f = open_memstream(&out->text, &out->len);
    return out->f ? 0 : error_set(err, "out of memory for an output file's text");
}

int text_out_commit(TextOut *out, const char *path, Error *err)
{
    int failed = ferror(out->f);        /* the text, not the disk: only memory can fail */
    if (fclose(out->f) != 0) failed = 1;
    out->f = NULL;
    int rc = failed ? error_set(err, "cannot write %s: out of memory for its text", path)
                    : file_write_atomic(path, &(FilePart){out->text, out->len}, 1, err);
    free(out->text);
    out->text = NULL;
    return rc;
}

void text_out_discard(TextOut *out)
{
    if (out->f) fclose(out->f);
    out->f = NULL;
    free(out->text);
    out->text = NULL;
}

int safetensors_write(const char *path, const TensorFile *file, Error *err)
{
    size_t header_len;
    char *header = build_header(file, &header_len);
    FilePart *parts = malloc((size_t)(file->n_tensors + 2) * sizeof *parts);
    if (!header || !parts) {
        free(header), free(parts);
        return error_set(err, "%s: out of memory building the header", path);
    }
    unsigned char len_bytes[8];
    for (int i = 0; i < 8; i++) len_bytes[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    parts[0] = (FilePart){len_bytes, 8};
    parts[1] = (FilePart){header, header_len};
    for (int i = 0; i < file->n_tensors; i++) {
        const Tensor *t = &file->tensors[i].tensor;
        parts[i + 2] = (FilePart){t->data, (size_t)tensor_numel(t) * dtype_size(t->dtype)};
    }
    int rc = file_write_atomic(path, parts, file->n_tensors + 2, err);
    free(parts), free(header);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Tensors and metadata by name                                             */
/* ------------------------------------------------------------------------ */

const Tensor *tensorfile_find(const TensorFile *file, const char *name)
{
    for (int i = 0; i < file->n_tensors; i++)
        if (strcmp(file->tensors[i].name, name) == 0) return &file->tensors[i].tensor;
    return NULL;
}

static const char *file_label(const TensorFile *file)
{
    return file->path ? file->path : "(case)";
}

int tensorfile_get(const TensorFile *file, const char *name, DType dtype, int ndim,
                   const Tensor **out, Error *err)
{
    const Tensor *t = tensorfile_find(file, name);
    if (!t) return error_set(err, "%s: tensor '%s' is missing", file_label(file), name);
    if (t->dtype != dtype)
        return error_set(err, "%s: tensor '%s' has dtype %s, expected %s", file_label(file),
                         name, dtype_name(t->dtype), dtype_name(dtype));
    if (ndim >= 0 && t->ndim != ndim)
        return error_set(err, "%s: tensor '%s' has rank %d, expected %d", file_label(file),
                         name, t->ndim, ndim);
    *out = t;
    return 0;
}

int tensorfile_add(TensorFile *file, const char *name, Tensor *tensor, Error *err)
{
    for (int i = 0; i < file->n_tensors; i++) {
        if (strcmp(file->tensors[i].name, name) == 0) {
            tensor_free(&file->tensors[i].tensor);
            file->tensors[i].tensor = *tensor;
            memset(tensor, 0, sizeof *tensor);
            return 0;
        }
    }
    NamedTensor *grown = realloc(file->tensors, (size_t)(file->n_tensors + 1) * sizeof *grown);
    if (!grown) return error_set(err, "out of memory adding tensor '%s'", name);
    file->tensors = grown;
    char *copy = copy_string(name);
    if (!copy) return error_set(err, "out of memory adding tensor '%s'", name);
    file->tensors[file->n_tensors++] = (NamedTensor){copy, *tensor};
    memset(tensor, 0, sizeof *tensor);
    return 0;
}

int tensorfile_add_f32(TensorFile *file, const char *name, const float *data, int ndim,
                       const int64_t *shape, Error *err)
{
    Tensor t;
    if (tensor_alloc(&t, DTYPE_F32, ndim, shape, err) != 0) return -1;
    memcpy(t.data, data, (size_t)tensor_numel(&t) * sizeof(float));
    if (tensorfile_add(file, name, &t, err) != 0) {
        tensor_free(&t);
        return -1;
    }
    return 0;
}

const char *tensorfile_meta(const TensorFile *file, const char *key)
{
    for (int i = 0; i < file->n_meta; i++)
        if (strcmp(file->meta_keys[i], key) == 0) return file->meta_values[i];
    return NULL;
}

int tensorfile_set_meta(TensorFile *file, const char *key, const char *value, Error *err)
{
    char *v = copy_string(value);
    if (!v) return error_set(err, "out of memory setting metadata '%s'", key);
    for (int i = 0; i < file->n_meta; i++) {
        if (strcmp(file->meta_keys[i], key) == 0) {
            free(file->meta_values[i]);
            file->meta_values[i] = v;
            return 0;
        }
    }
    char *k = copy_string(key);
    char **keys = realloc(file->meta_keys, (size_t)(file->n_meta + 1) * sizeof *keys);
    if (keys) file->meta_keys = keys;
    char **values = realloc(file->meta_values, (size_t)(file->n_meta + 1) * sizeof *values);
    if (values) file->meta_values = values;
    if (!k || !keys || !values) {
        free(k);
        free(v);
        return error_set(err, "out of memory setting metadata '%s'", key);
    }
    file->meta_keys[file->n_meta] = k;
    file->meta_values[file->n_meta] = v;
    file->n_meta++;
    return 0;
}

int tensorfile_meta_double(const TensorFile *file, const char *key, double fallback,
                           double *out, Error *err)
{
    const char *s = tensorfile_meta(file, key);
    if (!s) {
        *out = fallback;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE)
        return error_set(err, "%s: metadata '%s' is '%s', expected a number",
                         file_label(file), key, s);
    *out = v;
    return 0;
}

int tensorfile_meta_int(const TensorFile *file, const char *key, long long fallback,
                        long long *out, Error *err)
{
    const char *s = tensorfile_meta(file, key);
    if (!s) {
        *out = fallback;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE)
        return error_set(err, "%s: metadata '%s' is '%s', expected an integer",
                         file_label(file), key, s);
    *out = v;
    return 0;
}

int tensorfile_meta_bool(const TensorFile *file, const char *key, int fallback, int *out,
                         Error *err)
{
    const char *s = tensorfile_meta(file, key);
    if (!s)
        *out = fallback;
    else if (strcmp(s, "true") == 0)
        *out = 1;
    else if (strcmp(s, "false") == 0)
        *out = 0;
    else
        return error_set(err, "%s: metadata '%s' is '%s', expected true or false",
                         file_label(file), key, s);
    return 0;
}
