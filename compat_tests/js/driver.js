#!/usr/bin/env node
'use strict'
/*
 * kbroker compatibility driver for KafkaJS.
 *
 * Same command line and JSON-lines output as the Java driver (compat_tests/java/README.md) and
 * the matrix's extensions (compat_tests/drivers/registry.py FEATURES); see README.md here.
 *
 *   node driver.js version
 *   node driver.js produce --bootstrap H:P --topic T --count N [--compression none|gzip|snappy|lz4|zstd]
 *        [--acks all|1|0] [--idempotent true|false] [--key-prefix k] [--value-prefix v]
 *        [--null-key-every N] [--headers] [--partition P] [--timestamp MS] [--value-size N]
 *        [--timeout-ms MS] [--linger-ms MS] [--client-id ID] [--property k=v ...]
 *        [--transactional-id ID [--transaction commit|abort]]  (all records in one transaction)
 *   node driver.js consume --bootstrap H:P --topic T --count N [--group G] [--from-beginning]
 *        [--timeout-ms MS] [--isolation read_committed|read_uncommitted] [--client-id ID]
 *   node driver.js admin --bootstrap H:P ACTION [--topic T] ...
 *   node driver.js sr-produce|sr-consume|sr-register --registry URL ...  (registry.js)
 *
 * Exit codes: 0 ok, 1 error (an {"event":"error"} line is printed), 2 consume timed out, 64 usage.
 */

const crypto = require('crypto')
const fs = require('fs')

const EXIT_OK = 0
const EXIT_ERROR = 1
const EXIT_TIMEOUT = 2
const EXIT_USAGE = 64
const CLIENT_HEADER = 'kafkajs'

class Usage extends Error {}

function emit (fields) {
  process.stdout.write(JSON.stringify(fields) + '\n')
}

// ------------------------------------------------------------------------------------- arguments

/** The Java driver's parser: flags listed up front, every other --option takes a value. */
function parseArgs (argv, flagNames) {
  const known = new Set(flagNames)
  const a = { positional: [], opts: new Map(), flags: new Set() }
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i]
    if (!s.startsWith('--')) {
      a.positional.push(s)
      continue
    }
    let name = s.slice(2)
    let value = null
    const eq = name.indexOf('=')
    if (eq >= 0) {
      value = name.slice(eq + 1)
      name = name.slice(0, eq)
    }
    if (known.has(name) && value === null) {
      if (i + 1 < argv.length && (argv[i + 1] === 'true' || argv[i + 1] === 'false')) {
        if (argv[++i] === 'true') a.flags.add(name)
      } else {
        a.flags.add(name)
      }
      continue
    }
    if (value === null) {
      if (i + 1 >= argv.length) throw new Usage(`missing value for --${name}`)
      value = argv[++i]
    }
    if (known.has(name)) {
      if (value === 'true') a.flags.add(name)
    } else {
      if (!a.opts.has(name)) a.opts.set(name, [])
      a.opts.get(name).push(value)
    }
  }
  return new Args(a)
}

class Args {
  constructor ({ positional, opts, flags }) {
    this.positional = positional
    this.opts = opts
    this.flags = flags
  }

  flag (name) { return this.flags.has(name) }
  has (name) { return this.opts.has(name) }
  all (name) { return this.opts.get(name) || [] }
  get (name, dflt) {
    const v = this.opts.get(name)
    return v ? v[v.length - 1] : dflt
  }

  require (name) {
    const v = this.get(name, undefined)
    if (v === undefined) throw new Usage(`--${name} is required`)
    return v
  }

  int (name, dflt) {
    const v = this.get(name, undefined)
    if (v === undefined) return dflt
    if (!/^-?\d+$/.test(v)) throw new Usage(`--${name} wants an integer, got ${v}`)
    return Number(v)
  }

  bool (name, dflt) {
    const v = this.get(name, undefined)
    if (v === undefined) return dflt
    if (v !== 'true' && v !== 'false') throw new Usage(`--${name} wants true or false, got ${v}`)
    return v === 'true'
  }

  keyValues (name) {
    return this.all(name).map(kv => {
      const eq = kv.indexOf('=')
      if (eq <= 0) throw new Usage(`--${name} wants k=v, got ${kv}`)
      return [kv.slice(0, eq), kv.slice(eq + 1)]
    })
  }
}

// ------------------------------------------------------------------------------------- the client

const kafkajs = require('kafkajs')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = kafkajs

/**
 * KafkaJS ships gzip only; snappy, lz4 and zstd come from codec packages (lz4 and zstd are
 * native builds). A codec whose package does not load is reported, with the reason, by `version`
 * and by `produce --compression` (error "unsupported", exit 64).
 */
const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
const unsupportedCodecs = {}
function loadCodec (name, type, load) {
  try {
    CompressionCodecs[type] = load()
    codecs[name] = type
  } catch (e) {
    unsupportedCodecs[name] = `${e.code || e.name}: ${String(e.message).split('\n')[0]}`
  }
}
loadCodec('snappy', CompressionTypes.Snappy, () => require('kafkajs-snappy'))
loadCodec('lz4', CompressionTypes.LZ4, () => new (require('kafkajs-lz4'))().codec)
loadCodec('zstd', CompressionTypes.ZSTD, () => require('@kafkajs/zstd')())

function packageVersion (name) {
  try {
    return require(`${name}/package.json`).version
  } catch (e) {
    return null
  }
}

/** KBROKER_DRIVER_DEBUG=1 (or debug, info, warn) logs KafkaJS's view of things on stderr. */
function clientLogLevel () {
  return {
    1: logLevel.DEBUG,
    debug: logLevel.DEBUG,
    info: logLevel.INFO,
    warn: logLevel.WARN
  }[process.env.KBROKER_DRIVER_DEBUG || ''] ?? logLevel.NOTHING
}

function stderrLogCreator () {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`[${label}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
  }
}

/** Java-style --property settings that KafkaJS has; the others are reported on stderr. */
function properties (a) {
  const out = { security: {} }
  for (const [k, v] of a.keyValues('property')) {
    switch (k) {
      case 'security.protocol':
      case 'ssl.truststore.location':
      case 'ssl.truststore.type':
      case 'ssl.keystore.location':
      case 'ssl.keystore.type':
      case 'sasl.mechanism':
      case 'sasl.jaas.config':
      case 'sasl.login.callback.handler.class':
      case 'sasl.oauthbearer.token.endpoint.url': out.security[k] = v; break
      case 'allow.auto.create.topics': out.allowAutoTopicCreation = v === 'true'; break
      case 'request.timeout.ms': out.requestTimeout = Number(v); break
      case 'session.timeout.ms': out.sessionTimeout = Number(v); break
      case 'heartbeat.interval.ms': out.heartbeatInterval = Number(v); break
      case 'rebalance.timeout.ms':
      case 'max.poll.interval.ms': out.rebalanceTimeout = Number(v); break
      case 'max.partition.fetch.bytes': out.maxBytesPerPartition = Number(v); break
      case 'fetch.max.bytes': out.maxBytes = Number(v); break
      case 'fetch.max.wait.ms': out.maxWaitTimeInMs = Number(v); break
      case 'retries': out.retries = Number(v); break
      default:
        process.stderr.write(`kbroker-js-driver: ignoring --property ${k} (no KafkaJS equivalent)\n`)
    }
  }
  return out
}

function client (a, props) {
  const bootstrap = a.require('bootstrap')
  const config = {
    clientId: a.get('client-id', 'kbroker-js-driver'),
    brokers: bootstrap.split(','),
    logLevel: clientLogLevel(),
    logCreator: stderrLogCreator,
    connectionTimeout: 10000
  }
  if (props.requestTimeout !== undefined) config.requestTimeout = props.requestTimeout
  if (props.retries !== undefined) config.retry = { retries: props.retries }
  Object.assign(config, securityConfig(props.security))
  return new Kafka(config)
}

/**
 * The Java client's security settings as KafkaJS's `ssl` and `sasl` options: PEM trust and key
 * stores (Kafka's ssl.*.type=PEM; the key store holds the key and the chain in one file) and
 * the username/password of sasl.jaas.config. What KafkaJS cannot take this way is refused.
 */
function securityConfig (s) {
  const protocol = (s['security.protocol'] || 'PLAINTEXT').toUpperCase()
  const out = {}
  if (!['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'].includes(protocol)) {
    throw new Usage(`unknown security.protocol ${protocol}`)
  }
  if (protocol.endsWith('SSL')) {
    for (const key of ['ssl.truststore.type', 'ssl.keystore.type']) {
      if (s[key] && s[key].toUpperCase() !== 'PEM') {
        throw new Usage(`--property ${key}=${s[key]}: the KafkaJS driver reads PEM stores only`)
      }
    }
    const ssl = {}
    if (s['ssl.truststore.location']) ssl.ca = [fs.readFileSync(s['ssl.truststore.location'])]
    if (s['ssl.keystore.location']) {
      // Node's TLS picks the key and the certificates out of the same PEM text.
      ssl.key = ssl.cert = fs.readFileSync(s['ssl.keystore.location'])
    }
    out.ssl = Object.keys(ssl).length ? ssl : true
  }
  if (protocol.startsWith('SASL_')) {
    const jaas = {}
    for (const m of (s['sasl.jaas.config'] || '').matchAll(/(\w+)\s*=\s*"([^"]*)"/g)) jaas[m[1]] = m[2]
    const mechanism = (s['sasl.mechanism'] || 'GSSAPI').toLowerCase()
    if (mechanism === 'oauthbearer' && s['sasl.oauthbearer.token.endpoint.url']) {
      out.sasl = { mechanism, oauthBearerProvider: tokenEndpointProvider(s['sasl.oauthbearer.token.endpoint.url'], jaas) }
      return out
    }
    if (!['plain', 'scram-sha-256', 'scram-sha-512'].includes(mechanism)) {
      throw new Usage(`--property sasl.mechanism=${mechanism}: not mapped by the KafkaJS driver`)
    }
    if (!jaas.username) throw new Usage('--property sasl.jaas.config needs username="..." password="..."')
    out.sasl = { mechanism, username: jaas.username, password: jaas.password }
  }
  return out
}

/**
 * Kafka's OAuthBearerLoginCallbackHandler settings (the token endpoint, clientId, clientSecret and
 * scope of the OAuthBearerLoginModule entry) as KafkaJS's oauthBearerProvider: a client-credentials
 * token (HTTP Basic) for each login.
 */
function tokenEndpointProvider (url, jaas) {
  return async () => {
    const basic = Buffer.from(`${encodeURIComponent(jaas.clientId)}:${encodeURIComponent(jaas.clientSecret)}`).toString('base64')
    const form = new URLSearchParams({ grant_type: 'client_credentials', ...(jaas.scope ? { scope: jaas.scope } : {}) })
    const response = await fetch(url, { method: 'POST', body: form, headers: { Authorization: `Basic ${basic}` } })
    if (!response.ok) throw new Error(`token endpoint ${url} answered ${response.status}`)
    return { value: (await response.json()).access_token }
  }
}

/** An error event: KafkaJS's error class, its message and the Kafka error name when it has one. */
function errorEvent (e, extra = {}) {
  let err = e
  // KafkaJSNumberOfRetriesExceeded and friends wrap the real cause.
  while (err && err.name === 'KafkaJSNumberOfRetriesExceeded' && err.cause) err = err.cause
  const fields = { event: 'error', ...extra, error: (err && err.name) || 'Error', message: String(err && err.message) }
  if (err && err.type) fields.code = err.type
  if (e !== err) fields.wrapped = e.name
  return fields
}

function text (buf) {
  if (buf === null || buf === undefined) return null
  return Buffer.isBuffer(buf) ? buf.toString('utf8') : String(buf)
}

function withTimeout (promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => {
      const e = new Error(`${what} did not finish within ${ms} ms`)
      e.name = 'TimeoutError'
      reject(e)
    }, ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

// ------------------------------------------------------------------------------------- produce


// The default (Java-compatible murmur2) partitioner, remembering where each record went so that
// its offset can be told from the partition's base offset: { placed: Map(message -> partition),
// createPartitioner } for a producer's options.
function recordingPartitioner () {
  const placed = new Map()
  const createPartitioner = () => {
    const dflt = kafkajs.Partitioners.DefaultPartitioner()
    return args => {
      const p = dflt(args)
      placed.set(args.message, p)
      return p
    }
  }
  return { placed, createPartitioner }
}

async function produce (a) {
  const topic = a.require('topic')
  const count = a.int('count', 10)
  const keyPrefix = a.get('key-prefix', 'key-')
  const valuePrefix = a.get('value-prefix', 'value-')
  const nullKeyEvery = a.int('null-key-every', 0)
  const headers = a.flag('headers')
  const partition = a.has('partition') ? a.int('partition') : null
  const timestamp = a.has('timestamp') ? a.int('timestamp') : null
  const valueSize = a.int('value-size', 0)
  const timeoutMs = a.int('timeout-ms', 30000)
  const compressionName = a.get('compression', 'none').toLowerCase()
  const acksName = a.get('acks', 'all')
  const acks = { all: -1, '-1': -1, 1: 1, 0: 0 }[acksName]
  if (acks === undefined) throw new Usage(`unknown --acks ${acksName}`)
  // KafkaJS's idempotent producer needs acks=all (and one request in flight).
  const idempotent = a.bool('idempotent', acks === -1)
  if (idempotent && acks !== -1) throw new Usage('--idempotent true needs --acks all')
  if (!['none', 'gzip', 'snappy', 'lz4', 'zstd'].includes(compressionName)) {
    throw new Usage(`unknown --compression ${compressionName}`)
  }
  if (!(compressionName in codecs)) {
    // The contract's "unsupported feature": exit 64 with error "unsupported".
    emit({ event: 'error', error: 'unsupported', message: `KafkaJS has no ${compressionName} codec here: ${unsupportedCodecs[compressionName]}` })
    return EXIT_USAGE
  }
  // As the Java driver: with --transactional-id every record goes into one transaction that ends
  // as --transaction says, followed by a "transaction" event.
  const transactionalId = a.get('transactional-id', null)
  const transaction = a.get('transaction', 'commit')
  if (!['commit', 'abort'].includes(transaction)) throw new Usage(`unknown --transaction ${transaction}`)
  if (transactionalId !== null && !idempotent) {
    throw new Usage('--transactional-id needs an idempotent producer (--idempotent true)')
  }
  const props = properties(a)

  const { placed, createPartitioner } = recordingPartitioner()
  const kafka = client(a, props)
  const producer = kafka.producer({
    idempotent,
    maxInFlightRequests: idempotent ? 1 : undefined,
    transactionalId: transactionalId ?? undefined,
    allowAutoTopicCreation: props.allowAutoTopicCreation ?? true,
    createPartitioner
  })

  const messages = []
  const started = Date.now()
  for (let i = 0; i < count; i++) {
    const nullKey = nullKeyEvery > 0 && i % nullKeyEvery === nullKeyEvery - 1
    let value = `${valuePrefix}${i}`
    if (value.length < valueSize) value += '.'.repeat(valueSize - value.length)
    const m = {
      key: nullKey ? null : Buffer.from(`${keyPrefix}${i}`),
      value: Buffer.from(value),
      timestamp: String(timestamp !== null ? timestamp + i : started)
    }
    if (headers) m.headers = { 'h-index': String(i), 'h-client': CLIENT_HEADER }
    if (partition !== null) m.partition = partition
    messages.push(m)
  }

  let acked = 0
  let failed = false
  try {
    await withTimeout(producer.connect(), timeoutMs, 'connecting')
    // KafkaJS's transaction() runs InitProducerId for the transactional id, then begins.
    const sender = transactionalId === null
      ? producer
      : await withTimeout(producer.transaction(), timeoutMs, 'beginning the transaction')
    const codec = codecs[compressionName]
    const deadline = Date.now() + timeoutMs
    // KafkaJS puts everything one send() gets for a partition into one batch, with no size
    // bound (Java splits at batch.size): keep each send under the broker's default
    // max.message.bytes (1 MiB) as KafkaJS users must.
    for (const chunk of chunks(messages, 512 * 1024)) {
      const results = await withTimeout(
        sender.send({ topic, messages: chunk.map(i => messages[i]), acks, compression: codec, timeout: timeoutMs }),
        Math.max(1, deadline - Date.now()), `delivering ${count} records`)
      const byPartition = new Map(results.map(r => [r.partition, r]))
      const seen = new Map()
      for (const i of chunk) {
        const m = messages[i]
        const p = placed.has(m) ? placed.get(m) : m.partition
        const md = byPartition.get(p)
        const pos = seen.get(p) || 0
        seen.set(p, pos + 1)
        const base = md && md.baseOffset !== undefined ? Number(md.baseOffset) : -1
        const appendTime = md && md.logAppendTime !== undefined ? Number(md.logAppendTime) : -1
        emit({
          event: 'produced',
          index: i,
          topic,
          partition: p,
          offset: base >= 0 ? base + pos : -1,
          timestamp: appendTime >= 0 ? appendTime : Number(m.timestamp)
        })
        acked++
      }
    }
    if (transactionalId !== null) {
      await withTimeout(transaction === 'abort' ? sender.abort() : sender.commit(),
        Math.max(1, deadline - Date.now()), `ending the transaction (${transaction})`)
      emit({ event: 'transaction', result: transaction })
    }
  } catch (e) {
    emit(errorEvent(e))
    failed = true
  } finally {
    await producer.disconnect().catch(() => {})
  }
  emit({ event: 'done', produced: acked, requested: count })
  return acked === count && !failed ? EXIT_OK : EXIT_ERROR
}

/** Indexes of messages, in order, grouped so that each group's keys and values stay under max bytes. */
function chunks (messages, max) {
  const out = []
  let current = []
  let size = 0
  messages.forEach((m, i) => {
    const bytes = (m.key ? m.key.length : 0) + m.value.length + 64
    if (current.length && size + bytes > max) {
      out.push(current)
      current = []
      size = 0
    }
    current.push(i)
    size += bytes
  })
  if (current.length) out.push(current)
  return out
}

// ------------------------------------------------------------------------------------- consume

/**
 * KafkaJS consumes through a consumer group only. Without --group the driver joins a group of
 * its own (a fresh id per run, so it is alone and gets every partition) and commits nothing;
 * with --group it commits what it read at the end, as the Java driver does.
 */
async function consume (a) {
  const topic = a.require('topic')
  const count = a.int('count', 10)
  const timeoutMs = a.int('timeout-ms', 30000)
  const group = a.get('group', null)
  const fromBeginning = a.flag('from-beginning')
  const isolation = a.get('isolation', 'read_uncommitted')
  if (!['read_uncommitted', 'read_committed'].includes(isolation)) {
    throw new Usage(`unknown --isolation ${isolation}`)
  }
  const props = properties(a)
  const kafka = client(a, props)
  const groupId = group || `kbroker-js-driver-${crypto.randomUUID()}`
  const consumer = kafka.consumer({
    groupId,
    allowAutoTopicCreation: props.allowAutoTopicCreation ?? false,
    readUncommitted: isolation === 'read_uncommitted',
    maxWaitTimeInMs: props.maxWaitTimeInMs ?? 500,
    ...(props.sessionTimeout !== undefined && { sessionTimeout: props.sessionTimeout }),
    ...(props.heartbeatInterval !== undefined && { heartbeatInterval: props.heartbeatInterval }),
    ...(props.rebalanceTimeout !== undefined && { rebalanceTimeout: props.rebalanceTimeout }),
    ...(props.maxBytesPerPartition !== undefined && { maxBytesPerPartition: props.maxBytesPerPartition }),
    ...(props.maxBytes !== undefined && { maxBytes: props.maxBytes })
  })

  let owned = null
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    owned = [...((payload.memberAssignment || {})[topic] || [])].sort((x, y) => x - y)
    emit({ event: 'assigned', partitions: owned })
  })
  consumer.on(consumer.events.REBALANCING, () => {
    // KafkaJS's groups are eager: a rebalance takes every partition back.
    if (owned && owned.length) emit({ event: 'revoked', partitions: owned })
    owned = null
  })
  let crashed = null
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    crashed = payload.error
  })

  let seen = 0
  const next = new Map() // partition -> next offset to commit
  let finish
  const finished = new Promise(resolve => { finish = resolve })
  const deadline = setTimeout(() => finish('timeout'), timeoutMs)
  let rc = EXIT_OK
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning })
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
        for (const m of batch.messages) {
          if (seen >= count || !isRunning() || isStale()) break
          const ctx = m.batchContext || {}
          const hs = []
          for (const [k, v] of Object.entries(m.headers || {})) {
            for (const one of Array.isArray(v) ? v : [v]) hs.push({ key: k, value: text(one) })
          }
          const epoch = ctx.partitionLeaderEpoch
          emit({
            event: 'record',
            topic: batch.topic,
            partition: batch.partition,
            offset: Number(m.offset),
            key: text(m.key),
            value: text(m.value),
            headers: hs,
            timestamp: Number(m.timestamp),
            timestampType: ctx.timestampType === 1 ? 'LogAppendTime' : 'CreateTime',
            leaderEpoch: epoch === undefined || epoch < 0 ? null : epoch
          })
          seen++
          resolveOffset(m.offset)
          next.set(batch.partition, Number(m.offset) + 1)
        }
        await heartbeat()
        if (seen >= count) finish('count')
      }
    })
    const why = await Promise.race([finished, new Promise(resolve => {
      const poll = setInterval(() => { if (crashed) { clearInterval(poll); resolve('crash') } }, 100)
      finished.then(() => clearInterval(poll))
    })])
    if (why === 'crash') throw crashed
    if (group && next.size) {
      await consumer.commitOffsets([...next].map(([partition, offset]) =>
        ({ topic, partition, offset: String(offset) })))
    }
  } catch (e) {
    emit(errorEvent(e))
    rc = EXIT_ERROR
  } finally {
    clearTimeout(deadline)
    await withTimeout(consumer.disconnect(), 10000, 'leaving the group').catch(() => {})
  }
  if (rc !== EXIT_OK) return rc
  const ok = seen >= count
  emit({ event: 'done', consumed: seen, requested: count, timedOut: !ok })
  return ok ? EXIT_OK : EXIT_TIMEOUT
}

// ------------------------------------------------------------------------------------- admin

const DYNAMIC_TOPIC_CONFIG = 1
// DescribeConfigs' ConfigSource values by Kafka's names (KafkaJS exports them as numbers).
const CONFIG_SOURCES = ['UNKNOWN', 'DYNAMIC_TOPIC_CONFIG', 'DYNAMIC_BROKER_CONFIG',
  'DYNAMIC_DEFAULT_BROKER_CONFIG', 'STATIC_BROKER_CONFIG', 'DEFAULT_CONFIG',
  'DYNAMIC_BROKER_LOGGER_CONFIG', 'CLIENT_METRICS_CONFIG', 'GROUP_CONFIG']

async function admin (a) {
  if (a.positional.length === 0) throw new Usage('admin needs an action')
  const action = a.positional[0]
  const props = properties(a)
  const kafka = client(a, props)
  const adm = kafka.admin()
  const timeout = a.int('timeout-ms', 30000)
  const actions = {
    'create-topic': async () => {
      const topic = a.require('topic')
      const partitions = a.int('partitions', 1)
      const replicationFactor = a.int('replication-factor', 1)
      const configEntries = a.keyValues('config').map(([name, value]) => ({ name, value }))
      const created = await adm.createTopics({
        topics: [{ topic, numPartitions: partitions, replicationFactor, configEntries }],
        timeout
      })
      if (!created) {
        // KafkaJS answers TOPIC_ALREADY_EXISTS with false rather than an error.
        const e = new Error(`Topic '${topic}' already exists.`)
        e.name = 'KafkaJSProtocolError'
        e.type = 'TOPIC_ALREADY_EXISTS'
        throw e
      }
      emit({ event: 'created', topic, partitions, replicationFactor })
    },
    'delete-topic': async () => {
      const topic = a.require('topic')
      await adm.deleteTopics({ topics: [topic], timeout })
      emit({ event: 'deleted', topic })
    },
    'describe-topic': async () => {
      const topic = a.require('topic')
      const md = await adm.fetchTopicMetadata({ topics: [topic] })
      const t = md.topics.find(x => x.name === topic)
      const partitions = [...t.partitions].sort((x, y) => x.partitionId - y.partitionId).map(p => ({
        partition: p.partitionId,
        leader: p.leader >= 0 ? p.leader : null,
        replicas: p.replicas,
        isr: p.isr
      }))
      emit({ event: 'topic', topic, internal: topic.startsWith('__'), partitions })
    },
    'list-topics': async () => {
      const names = await adm.listTopics()
      emit({ event: 'topics', topics: names.filter(n => a.flag('internal') || !n.startsWith('__')).sort() })
    },
    'create-partitions': async () => {
      const topic = a.require('topic')
      const count = a.int('partitions')
      if (count === undefined) throw new Usage('create-partitions needs --partitions N (the new total)')
      await adm.createPartitions({ topicPartitions: [{ topic, count }], timeout })
      emit({ event: 'partitions-created', topic, partitions: count })
    },
    'describe-configs': async () => {
      const topic = a.require('topic')
      const entries = await topicConfigEntries(adm, topic)
      const want = new Set(a.all('name'))
      const configs = {}
      const sources = {}
      for (const e of entries.sort((x, y) => x.configName.localeCompare(y.configName))) {
        if (want.size && !want.has(e.configName)) continue
        configs[e.configName] = e.configValue
        sources[e.configName] = CONFIG_SOURCES[e.configSource] || String(e.configSource)
      }
      emit({ event: 'configs', topic, configs, sources })
    },
    'alter-configs': async () => {
      // KafkaJS has only the legacy AlterConfigs, which replaces a topic's whole dynamic
      // config: keep the current dynamic values and change the requested ones.
      const topic = a.require('topic')
      const wanted = Object.fromEntries(a.keyValues('config'))
      if (!Object.keys(wanted).length) throw new Usage('alter-configs needs --config k=v')
      const merged = {}
      for (const e of await topicConfigEntries(adm, topic)) {
        if (e.configSource === DYNAMIC_TOPIC_CONFIG && e.configValue !== null) merged[e.configName] = e.configValue
      }
      Object.assign(merged, wanted)
      await adm.alterConfigs({
        validateOnly: false,
        resources: [{
          type: kafkajs.ConfigResourceTypes.TOPIC,
          name: topic,
          configEntries: Object.entries(merged).map(([name, value]) => ({ name, value }))
        }]
      })
      emit({ event: 'configs-altered', topic, configs: wanted })
    },
    'list-offsets': async () => {
      const topic = a.require('topic')
      // Loads the topic's metadata; an unknown topic fails here rather than being retried.
      await adm.fetchTopicMetadata({ topics: [topic] })
      const offsets = await adm.fetchTopicOffsets(topic)
      const found = new Map(offsets.map(o => [o.partition, {
        partition: o.partition, earliest: Number(o.low), latest: Number(o.high)
      }]))
      if (a.has('timestamp')) {
        const high = new Map([...found.values()].map(o => [o.partition, o.latest]))
        const byTime = await offsetsForTimestamp(adm, topic, a.int('timestamp'), high)
        for (const [p, offset] of byTime) found.get(p).forTimestamp = offset
      }
      emit({ event: 'offsets', topic, partitions: [...found.values()].sort((x, y) => x.partition - y.partition) })
    },
    'delete-records': async () => {
      const topic = a.require('topic')
      const partition = a.int('partition', 0)
      const offset = a.int('offset')
      if (offset === undefined) throw new Usage('--offset is required (-1 for the high watermark)')
      // deleteTopicRecords looks the leaders up in metadata it does not load itself.
      await adm.fetchTopicMetadata({ topics: [topic] })
      await adm.deleteTopicRecords({ topic, partitions: [{ partition, offset: String(offset) }] })
      const low = (await adm.fetchTopicOffsets(topic)).find(o => o.partition === partition)
      emit({ event: 'records-deleted', topic, partition, lowWatermark: Number(low.low) })
    },
    'describe-cluster': async () => {
      const c = await adm.describeCluster()
      emit({
        event: 'cluster',
        clusterId: c.clusterId,
        controller: c.controller,
        brokers: c.brokers.map(b => ({ id: b.nodeId, host: b.host, port: b.port }))
      })
    }
  }
  const run = actions[action]
  if (!run) throw new Usage(`unknown admin action ${action}`)
  try {
    await withTimeout(adm.connect(), timeout, 'connecting')
    await withTimeout(run(), timeout, action)
  } finally {
    await adm.disconnect().catch(() => {})
  }
  return EXIT_OK
}

async function topicConfigEntries (adm, topic) {
  const res = await adm.describeConfigs({
    resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic }],
    includeSynonyms: false
  })
  const r = res.resources.find(x => x.resourceName === topic)
  if (r.errorCode) {
    const e = new Error(r.errorMessage || `error code ${r.errorCode}`)
    e.name = 'KafkaJSProtocolError'
    e.code = r.errorCode
    throw e
  }
  return r.configEntries
}

/**
 * ListOffsets by timestamp. KafkaJS answers "no record at or after MS" with the high watermark;
 * Kafka's own answer (and the contract's) is -1. A record that was found lies below the high
 * watermark, so the two cannot be confused.
 */
async function offsetsForTimestamp (adm, topic, ms, high) {
  const answer = await adm.fetchTopicOffsetsByTimestamp(topic, ms)
  return new Map(answer.map(p => {
    const offset = Number(p.offset)
    return [p.partition, offset >= high.get(p.partition) ? -1 : offset]
  }))
}

// ------------------------------------------------------------------------------------- main

function version () {
  emit({
    event: 'version',
    client: 'kafkajs',
    version: packageVersion('kafkajs'),
    node: process.version,
    codecs: Object.keys(codecs),
    ...(Object.keys(unsupportedCodecs).length && { unsupportedCodecs }),
    'kafkajs-snappy': packageVersion('kafkajs-snappy'),
    'kafkajs-lz4': packageVersion('kafkajs-lz4'),
    '@kafkajs/zstd': packageVersion('@kafkajs/zstd'),
    '@kafkajs/confluent-schema-registry': packageVersion('@kafkajs/confluent-schema-registry')
  })
  return EXIT_OK
}

async function main (argv) {
  const commands = {
    version: [[], () => version()],
    produce: [['headers'], produce],
    consume: [['from-beginning'], consume],
    admin: [['internal'], admin],
    ...require('./registry')({ emit, client, properties, errorEvent, withTimeout, Usage, recordingPartitioner })
  }
  const command = commands[argv[0]]
  if (!command) {
    process.stderr.write('usage: driver.js produce|consume|admin|sr-produce|sr-consume|sr-register|version ... (see compat_tests/js/README.md)\n')
    return EXIT_USAGE
  }
  try {
    return await command[1](parseArgs(argv.slice(1), command[0]))
  } catch (e) {
    if (e instanceof Usage) {
      emit({ event: 'error', error: 'usage', message: e.message })
      return EXIT_USAGE
    }
    emit(errorEvent(e))
    return EXIT_ERROR
  }
}

main(process.argv.slice(2)).then(rc => {
  // Let stdout drain, then leave even if a client left a timer behind.
  process.stdout.write('', () => process.exit(rc))
})
