CREATE TABLE `upstream_links` (
	`upstream` text NOT NULL,
	`subject` text NOT NULL,
	`user_id` text NOT NULL,
	`region` text,
	`bucket` text NOT NULL,
	PRIMARY KEY(`upstream`, `subject`)
);
--> statement-breakpoint
CREATE INDEX `upstream_links_bucket_idx` ON `upstream_links` (`bucket`);--> statement-breakpoint
ALTER TABLE `sessions` ADD `upstream` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `upstream_subject` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `upstream_sid` text;--> statement-breakpoint
ALTER TABLE `ssf_received_sets` ADD `subject` text;