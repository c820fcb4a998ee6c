-- The quick start's sample database, loaded by the MariaDB image on its first
-- start. The image creates the database shop and the account cdcsync
-- (MARIADB_DATABASE, MARIADB_USER in compose.yaml); this grants the account
-- what cdcsync needs: SELECT, and reading the binlog as a replica.
GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdcsync'@'%';

USE shop;

CREATE TABLE customers (
  id         INT PRIMARY KEY,
  name       VARCHAR(100) NOT NULL,
  email      VARCHAR(200),
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);

CREATE TABLE orders (
  id          BIGINT PRIMARY KEY AUTO_INCREMENT,
  customer_id INT NOT NULL,
  amount      DECIMAL(12,2) NOT NULL,
  status      VARCHAR(20) NOT NULL,
  note        TEXT,
  created_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);

INSERT INTO customers (id, name, email, created_at) VALUES
  (1, 'Ada Lovelace',    'ada@example.com',     '2024-01-05 09:00:00'),
  (2, 'Alan Turing',     'alan@example.com',    '2024-01-06 10:30:00.25'),
  (3, 'Grace Hopper',    'grace@example.com',   '2024-01-07 11:15:00'),
  (4, 'Edsger Dijkstra', 'edsger@example.com',  '2024-01-08 08:45:12.5'),
  (5, 'Barbara Liskov',  'barbara@example.com', '2024-01-09 14:00:00');

INSERT INTO orders (customer_id, amount, status, note, created_at) VALUES
  (1, 120.00, 'paid',    NULL,                        '2024-03-01 10:00:00'),
  (2,  75.50, 'new',     'gift wrap',                 '2024-03-01 11:37:00'),
  (3, 310.99, 'shipped', 'two parcels:\nbox A, box B', '2024-03-02 09:12:00'),
  (1,  18.90, 'paid',    NULL,                        '2024-03-02 16:28:00'),
  (5,  56.05, 'new',     NULL,                        '2024-03-03 08:05:00');
