// Drives the official RocketMQ Java client (rocketmq-client 4.9.x) for test_java_client.py.
//
//   java JavaDriver produce NAMESRV TOPIC GROUP COUNT TAGS MODE
//       Sends COUNT messages (body "java-<i>-<tag>", keys "jkey-<i> jshared"), cycling through the
//       comma-separated TAGS. MODE: sync, async, oneway, batch (one send of COUNT messages), orderly (a queue
//       selector on i % 2), trace (sync, with the client's message trace on). Prints one JSON line per
//       result (none for oneway).
//   java JavaDriver transaction NAMESRV TOPIC GROUP
//       Three half messages: the local transaction commits "tx-commit", rolls back "tx-rollback" and answers
//       UNKNOW for "tx-check", which the broker's check then commits. Prints each send result, waits for the
//       check and prints {"checked": [...]}.
//   java JavaDriver request NAMESRV TOPIC GROUP COUNT
//       Request-reply: a responder (push consumer of TOPIC answering each request with MessageUtil's reply
//       "re:<body>") and a requester sending COUNT requests "ping-<i>" with DefaultMQProducer.request. Prints
//       {"reply": ..., "ms": ...} per request.
//   java JavaDriver lite NAMESRV TOPIC GROUP EXPRESSION COUNT
//       DefaultLitePullConsumer: subscribe and poll until COUNT messages (auto-commit), then assign every queue,
//       seek to 0, poll everything again and commitSync. Prints {"subscribed": [...], "assigned": [...],
//       "committed": {queueId: offset}}.
//   java JavaDriver consume NAMESRV TOPIC GROUP EXPRESSION COUNT SECONDS MODE
//       Prints {"started": true} once the push consumer runs, then {"message": ...} per delivery. MODE: tag,
//       sql (EXPRESSION is SQL92), retry (each message is answered RECONSUME_LATER on its first delivery),
//       orderly (an orderly listener), broadcast (broadcasting model), trace (the client's consume trace
//       on). After COUNT deliveries it waits two more seconds for extras, prints {"received": [...]} and
//       exits 0; after SECONDS without COUNT it prints the same and exits 2.
//
// Credentials come from MQ_ACCESS_KEY / MQ_SECRET_KEY when set.
import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.RPCHook;

public class JavaDriver {
    static synchronized void emit(Object o) {
        System.out.println(JSON.toJSONString(o));
        System.out.flush();
    }

    static RPCHook hook() {
        String ak = System.getenv("MQ_ACCESS_KEY");
        if (ak == null || ak.isEmpty()) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(ak, System.getenv("MQ_SECRET_KEY")));
    }

    static Message message(String topic, int i, String tag) {
        Message m = new Message(topic, tag, "jkey-" + i + " jshared",
            ("java-" + i + "-" + tag).getBytes(StandardCharsets.UTF_8));
        return m;
    }

    static Map<String, Object> result(int i, String tag, SendResult r) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("i", i);
        out.put("tag", tag);
        out.put("status", r.getSendStatus().name());
        out.put("msgId", r.getMsgId());
        out.put("offsetMsgId", r.getOffsetMsgId());
        out.put("queueId", r.getMessageQueue().getQueueId());
        out.put("broker", r.getMessageQueue().getBrokerName());
        out.put("queueOffset", r.getQueueOffset());
        out.put("regionId", r.getRegionId());
        out.put("traceOn", r.isTraceOn());
        return out;
    }

    static void produce(String ns, String topic, String group, int count, String[] tags, String mode)
        throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group, hook(), mode.equals("trace"), null);
        p.setNamesrvAddr(ns);
        p.setInstanceName("java-driver-" + ProcessHandle.current().pid());
        p.start();
        try {
            if (mode.equals("batch")) {
                List<Message> msgs = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    msgs.add(message(topic, i, tags[i % tags.length]));
                }
                emit(result(0, "", p.send(msgs)));
            } else if (mode.equals("async")) {
                CountDownLatch done = new CountDownLatch(count);
                List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
                for (int i = 0; i < count; i++) {
                    final int k = i;
                    final String tag = tags[i % tags.length];
                    p.send(message(topic, i, tag), new SendCallback() {
                        public void onSuccess(SendResult r) {
                            emit(result(k, tag, r));
                            done.countDown();
                        }

                        public void onException(Throwable e) {
                            errors.add(e);
                            done.countDown();
                        }
                    });
                }
                if (!done.await(30, TimeUnit.SECONDS) || !errors.isEmpty()) {
                    throw new IllegalStateException("async sends failed: " + errors);
                }
            } else {
                for (int i = 0; i < count; i++) {
                    String tag = tags[i % tags.length];
                    Message m = message(topic, i, tag);
                    if (mode.equals("oneway")) {
                        p.sendOneway(m);
                    } else if (mode.equals("orderly")) {
                        emit(result(i, tag, p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), i % 2)));
                    } else {
                        emit(result(i, tag, p.send(m)));
                    }
                }
            }
            if (mode.equals("trace")) {
                Thread.sleep(2000); // the trace dispatcher sends its batch in the background
            }
        } finally {
            p.shutdown();
        }
    }

    static void transaction(String ns, String topic, String group) throws Exception {
        List<String> checked = Collections.synchronizedList(new ArrayList<>());
        TransactionMQProducer p = new TransactionMQProducer(group, hook());
        p.setNamesrvAddr(ns);
        p.setInstanceName("java-driver-" + ProcessHandle.current().pid());
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                if (body.equals("tx-commit")) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                return body.equals("tx-rollback") ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                checked.add(new String(m.getBody(), StandardCharsets.UTF_8));
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        try {
            int i = 0;
            for (String body : Arrays.asList("tx-commit", "tx-rollback", "tx-check")) {
                Message m = new Message(topic, "TagTx", body, body.getBytes(StandardCharsets.UTF_8));
                TransactionSendResult r = p.sendMessageInTransaction(m, null);
                Map<String, Object> out = result(i++, "TagTx", r);
                out.put("state", r.getLocalTransactionState().name());
                emit(out);
            }
            long deadline = System.currentTimeMillis() + 30_000;
            while (checked.isEmpty() && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            Thread.sleep(500); // let the commit of the check reach the broker
            emit(Collections.singletonMap("checked", new ArrayList<>(checked)));
        } finally {
            p.shutdown();
        }
    }

    static void request(String ns, String topic, String group, int count) throws Exception {
        DefaultMQProducer replier = new DefaultMQProducer(group + "_REPLIER", hook());
        replier.setNamesrvAddr(ns);
        replier.setInstanceName("java-driver-replier-" + ProcessHandle.current().pid());
        replier.start();
        DefaultMQPushConsumer responder = new DefaultMQPushConsumer(group + "_RESPONDER", hook(),
            new AllocateMessageQueueAveragely());
        responder.setNamesrvAddr(ns);
        responder.setInstanceName("java-driver-responder-" + ProcessHandle.current().pid());
        responder.subscribe(topic, "*");
        responder.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    String body = new String(m.getBody(), StandardCharsets.UTF_8);
                    replier.send(MessageUtil.createReplyMessage(m, ("re:" + body).getBytes(StandardCharsets.UTF_8)));
                } catch (Exception e) {
                    e.printStackTrace();
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        responder.start();
        DefaultMQProducer requester = new DefaultMQProducer(group, hook());
        requester.setNamesrvAddr(ns);
        requester.setInstanceName("java-driver-requester-" + ProcessHandle.current().pid());
        requester.start();
        try {
            for (int i = 0; i < count; i++) {
                long t0 = System.currentTimeMillis();
                Message reply = requester.request(new Message(topic, "TagReq", ("ping-" + i).getBytes(StandardCharsets.UTF_8)),
                    15000);
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("reply", new String(reply.getBody(), StandardCharsets.UTF_8));
                out.put("ms", System.currentTimeMillis() - t0);
                emit(out);
            }
        } finally {
            requester.shutdown();
            responder.shutdown();
            replier.shutdown();
        }
    }

    static void lite(String ns, String topic, String group, String expression, int count) throws Exception {
        DefaultLitePullConsumer sub = new DefaultLitePullConsumer(group, hook());
        sub.setNamesrvAddr(ns);
        sub.setInstanceName("java-driver-lite-" + ProcessHandle.current().pid());
        sub.subscribe(topic, expression);
        sub.start();
        List<String> subscribed = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (subscribed.size() < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : sub.poll(500)) {
                subscribed.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
        }
        sub.shutdown();
        DefaultLitePullConsumer assigned = new DefaultLitePullConsumer(group + "_ASSIGN", hook());
        assigned.setNamesrvAddr(ns);
        assigned.setInstanceName("java-driver-assign-" + ProcessHandle.current().pid());
        assigned.setAutoCommit(false);
        assigned.start();
        Collection<MessageQueue> queues = assigned.fetchMessageQueues(topic);
        assigned.assign(queues);
        for (MessageQueue mq : queues) {
            assigned.seek(mq, 0);
        }
        List<String> all = new ArrayList<>();
        long quiet = System.currentTimeMillis() + 3000;
        while (System.currentTimeMillis() < quiet) {
            List<MessageExt> got = assigned.poll(500);
            for (MessageExt m : got) {
                all.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
            if (!got.isEmpty()) {
                quiet = System.currentTimeMillis() + 1500;
            }
        }
        assigned.commitSync();
        Map<String, Long> committed = new LinkedHashMap<>();
        for (MessageQueue mq : queues) {
            committed.put(String.valueOf(mq.getQueueId()), assigned.committed(mq));
        }
        assigned.shutdown();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("subscribed", subscribed);
        out.put("assigned", all);
        out.put("committed", committed);
        emit(out);
    }

    static Map<String, Object> record(MessageExt m) {
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("msgId", m.getMsgId());
        rec.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId());
        rec.put("topic", m.getTopic());
        rec.put("tags", m.getTags());
        rec.put("keys", m.getKeys());
        rec.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        rec.put("queueId", m.getQueueId());
        rec.put("queueOffset", m.getQueueOffset());
        rec.put("reconsumeTimes", m.getReconsumeTimes());
        rec.put("storeHost", m.getStoreHost().toString().replaceFirst("^.*/", ""));
        rec.put("properties", m.getProperties());
        return rec;
    }

    static void consume(String ns, String topic, String group, String expression, int count, double seconds,
                        String mode) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook(), new AllocateMessageQueueAveragely(),
            mode.equals("trace"), null);
        c.setNamesrvAddr(ns);
        c.setInstanceName("java-driver-" + ProcessHandle.current().pid());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        if (mode.equals("broadcast")) {
            c.setMessageModel(MessageModel.BROADCASTING);
        }
        if (mode.equals("sql")) {
            c.subscribe(topic, MessageSelector.bySql(expression));
        } else {
            c.subscribe(topic, expression);
        }
        List<Map<String, Object>> received = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch all = new CountDownLatch(count);
        java.util.function.Consumer<List<MessageExt>> deliver = msgs -> {
            for (MessageExt m : msgs) {
                Map<String, Object> rec = record(m);
                emit(Collections.singletonMap("message", rec));
                received.add(rec);
                all.countDown();
            }
        };
        if (mode.equals("orderly")) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                deliver.accept(msgs);
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (mode.equals("retry") && m.getReconsumeTimes() == 0) {
                        emit(Collections.singletonMap("retryLater", m.getMsgId()));
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                }
                deliver.accept(msgs);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        c.start();
        emit(Collections.singletonMap("started", true));
        int code = all.await((long) (seconds * 1000), TimeUnit.MILLISECONDS) ? 0 : 2;
        if (code == 0) {
            Thread.sleep(2000); // unexpected extras
        }
        emit(Collections.singletonMap("received", new ArrayList<>(received)));
        c.shutdown();
        System.exit(code);
    }

    public static void main(String[] a) throws Exception {
        if (a.length < 4) {
            System.err.println("usage: JavaDriver produce|transaction|request|lite|consume NAMESRV TOPIC GROUP ...");
            System.exit(64);
        }
        try {
            switch (a[0]) {
                case "produce":
                    produce(a[1], a[2], a[3], Integer.parseInt(a[4]), a[5].split(","), a[6]);
                    break;
                case "transaction":
                    transaction(a[1], a[2], a[3]);
                    break;
                case "request":
                    request(a[1], a[2], a[3], Integer.parseInt(a[4]));
                    break;
                case "lite":
                    lite(a[1], a[2], a[3], a[4], Integer.parseInt(a[5]));
                    break;
                case "consume":
                    consume(a[1], a[2], a[3], a[4], Integer.parseInt(a[5]), Double.parseDouble(a[6]), a[7]);
                    break;
                default:
                    System.err.println("unknown mode " + a[0]);
                    System.exit(64);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(3);
        }
        System.exit(0);
    }
}
