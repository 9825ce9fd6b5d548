CREATE TABLE `admin_key_uses` (
	`key_id` text PRIMARY KEY NOT NULL,
	`last_used_at` integer NOT NULL
);
